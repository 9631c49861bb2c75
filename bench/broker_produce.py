"""Benchmark: produce throughput of pre-encoded batches to one broker, beside bare gRPC transport.

Starts ZooKeeper, one controller and one broker (the `LocalCluster` launcher, in a temp dir), creates
a one-partition topic, and sends ProduceRequests (acks=1) of one pre-encoded RecordBatch of 16 KiB
and of 1 MiB from `--inflight` client threads. The peer, in the same run, is a bare gRPC server in
its own process that takes the very same serialized request bytes and answers an empty reply: the
cost of the transport alone. Prints MB/s and requests/s for both and the ratio broker / transport.

    python bench/broker_produce.py [--seconds 5] [--inflight 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc  # noqa: E402

from services.clients.launcher import LocalCluster  # noqa: E402
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc  # noqa: E402
from services.common.pb.odradek.controller.v1 import controller_pb2, controller_pb2_grpc  # noqa: E402
from services.common.proc import free_port, start_process, stop_process, wait_until  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.service import GRPC_OPTIONS, insecure_channel  # noqa: E402

SINK_METHOD = "/bench.Sink/Take"


def serve_sink(port: int) -> None:
    """The peer: a gRPC server whose one method takes raw bytes and answers nothing."""
    handler = grpc.method_handlers_generic_handler("bench.Sink", {
        "Take": grpc.unary_unary_rpc_method_handler(lambda request, context: b"",
                                                    request_deserializer=None, response_serializer=None),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=GRPC_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def drive(call, payload, seconds: float, inflight: int) -> tuple[int, float]:
    """Calls `call(payload)` from `inflight` threads for `seconds`; returns (requests, elapsed)."""
    done = [0] * inflight
    stop_at = time.perf_counter() + seconds

    def worker(slot: int) -> None:
        while time.perf_counter() < stop_at:
            call(payload)
            done[slot] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(inflight)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done), time.perf_counter() - start


def produce_request(topic: str, batch: bytes) -> broker_pb2.ProduceRequest:
    request = broker_pb2.ProduceRequest(acks=1, timeout_ms=30000)
    request.topic_data.add(name=topic).partition_data.add(index=0, records=batch)
    return request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--serve-sink", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_sink:
        serve_sink(args.serve_sink)
        return

    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        base = Path(tmp)
        sink_port = free_port()
        sink = start_process([sys.executable, __file__, "--serve-sink", str(sink_port)], base / "sink.log")
        cluster = LocalCluster(base / "cluster", brokers=1, controllers=1, free_ports=True,
                               broker_config={"log.segment.bytes": 1 << 30, "num.io.threads": 16})
        try:
            cluster.start()
            topic = "bench"
            controller = controller_pb2_grpc.ControllerServiceStub(
                insecure_channel(cluster.endpoint(cluster.controller_names[0])))
            broker = broker_pb2_grpc.BrokerServiceStub(insecure_channel(cluster.endpoint("broker-1")))

            def create_topic():
                request = controller_pb2.CreateTopicsRequest(timeout_ms=10000)
                request.topics.add(name=topic, num_partitions=1, replication_factor=1)
                reply = controller.CreateTopics(request, timeout=15)
                return reply.error_code == 0 and all(t.error_code in (0, 36) for t in reply.topics)

            wait_until(create_topic, 60, 0.5, message="the bench topic to be created")
            wait_until(lambda: broker.Produce(produce_request(topic, build_batch([b"warm"])), timeout=10)
                       .responses[0].partition_responses[0].error_code == 0, 60, 0.2,
                       message="the broker to lead the bench partition")
            sink_channel = insecure_channel(f"127.0.0.1:{sink_port}")
            take = sink_channel.unary_unary(SINK_METHOD)
            wait_until(lambda: _reachable(take), 30, 0.1, message="the sink server")

            print(f"inflight={args.inflight} seconds={args.seconds:g} acks=1, one partition, one broker")
            print(f"{'request':<10}{'broker MB/s':>13}{'broker req/s':>14}{'transport MB/s':>16}"
                  f"{'transport req/s':>17}{'ratio':>8}")
            for label, size in (("16 KiB", 16 * 1024), ("1 MiB", 1024 * 1024)):
                record = os.urandom(1000)
                batch = build_batch([record] * max(1, size // 1008))
                request = produce_request(topic, batch)
                raw = request.SerializeToString()

                def produce(req):
                    reply = broker.Produce(req, timeout=30)
                    code = reply.responses[0].partition_responses[0].error_code
                    if code:
                        raise RuntimeError(f"produce failed with error code {code}")

                broker_n, broker_s = drive(produce, request, args.seconds, args.inflight)
                sink_n, sink_s = drive(lambda payload: take(payload, timeout=30), raw, args.seconds,
                                       args.inflight)
                broker_mb = broker_n * len(raw) / broker_s / 1e6
                sink_mb = sink_n * len(raw) / sink_s / 1e6
                print(f"{label:<10}{broker_mb:>13.1f}{broker_n / broker_s:>14.0f}{sink_mb:>16.1f}"
                      f"{sink_n / sink_s:>17.0f}{broker_mb / sink_mb:>7.2f}x")
        finally:
            cluster.stop()
            stop_process(sink)


def _reachable(take) -> bool:
    try:
        take(b"", timeout=1)
        return True
    except grpc.RpcError:
        return False


if __name__ == "__main__":
    main()
