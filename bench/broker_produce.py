"""Benchmark: produce throughput of pre-encoded batches to one broker, beside bare gRPC transport.

Starts ZooKeeper, one controller and one broker (the `LocalCluster` launcher, in a temp dir), creates
a one-partition topic, and sends pre-serialized ProduceRequests (acks=1) of one RecordBatch of 16 KiB
and of 1 MiB from `--inflight` client threads. The peer, in the same run, is a bare gRPC server in
its own process that takes the very same request bytes and answers an empty reply: the cost of the
transport alone. Prints MB/s and requests/s for both and the ratio broker / transport, once with the
broker's log.dirs in memory (tmpfs: the broker's own cost) and once on disk (this machine's disk
write-back limits sustained 1 MiB appends to a few hundred MB/s).

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

from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc  # noqa: E402
from services.common.pb.odradek.controller.v1 import controller_pb2, controller_pb2_grpc  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.service import GRPC_OPTIONS, node_channel  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import free_port, start_process, stop_process, wait_until  # noqa: E402

SINK_METHOD = "/bench.Sink/Take"
MEMORY_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None


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


def measure_cluster(base: Path, log_dir: Path, args, take) -> list[tuple[str, float, float, float, float]]:
    """Broker vs transport rows for one broker whose log.dirs is `log_dir`."""
    cluster = LocalCluster(base, brokers=1, controllers=1, free_ports=True,
                           broker_config={"log.dirs": str(log_dir), "log.segment.bytes": 1 << 30,
                                          "message.max.bytes": 2 << 20})
    rows = []
    try:
        cluster.start()
        topic = "bench"
        controller = controller_pb2_grpc.ControllerServiceStub(
            node_channel(cluster.endpoint(cluster.controller_names[0])))
        channel = node_channel(cluster.endpoint("broker-1"))
        broker = broker_pb2_grpc.BrokerServiceStub(channel)
        produce_raw = channel.unary_unary("/odradek.broker.v1.BrokerService/Produce",
                                          response_deserializer=broker_pb2.ProduceResponse.FromString)

        def create_topic():
            request = controller_pb2.CreateTopicsRequest(timeout_ms=10000)
            request.topics.add(name=topic, num_partitions=1, replication_factor=1)
            reply = controller.CreateTopics(request, timeout=15)
            return reply.error_code == 0 and all(t.error_code in (0, 36) for t in reply.topics)

        wait_until(create_topic, 60, 0.5, message="the bench topic to be created")
        wait_until(lambda: broker.Produce(produce_request(topic, build_batch([b"warm"])), timeout=10)
                   .responses[0].partition_responses[0].error_code == 0, 60, 0.2,
                   message="the broker to lead the bench partition")
        for label, size in (("16 KiB", 16 * 1024), ("1 MiB", 1024 * 1024)):
            record = os.urandom(1000)
            raw = produce_request(topic, build_batch([record] * max(1, size // 1008))).SerializeToString()

            def produce(payload):
                reply = produce_raw(payload, timeout=30)
                code = reply.responses[0].partition_responses[0].error_code
                if code:
                    raise RuntimeError(f"produce failed with error code {code}")

            broker_n, broker_s = drive(produce, raw, args.seconds, args.inflight)
            sink_n, sink_s = drive(lambda payload: take(payload, timeout=30), raw, args.seconds,
                                   args.inflight)
            rows.append((label, broker_n * len(raw) / broker_s / 1e6, broker_n / broker_s,
                         sink_n * len(raw) / sink_s / 1e6, sink_n / sink_s))
    finally:
        cluster.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--serve-sink", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_sink:
        serve_sink(args.serve_sink)
        return

    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp, \
            tempfile.TemporaryDirectory(prefix="odradek-bench-", dir=MEMORY_DIR) as memory:
        base = Path(tmp)
        sink_port = free_port()
        sink = start_process([sys.executable, __file__, "--serve-sink", str(sink_port)], base / "sink.log")
        try:
            take = node_channel(f"127.0.0.1:{sink_port}").unary_unary(SINK_METHOD)
            wait_until(lambda: _reachable(take), 30, 0.1, message="the sink server")
            print(f"inflight={args.inflight} seconds={args.seconds:g} acks=1, one partition, one broker; "
                  "both peers send the same serialized ProduceRequest bytes")
            print(f"{'log.dirs':<10}{'request':<9}{'broker MB/s':>13}{'broker req/s':>14}"
                  f"{'transport MB/s':>16}{'transport req/s':>17}{'ratio':>8}")
            for kind, log_dir in (("tmpfs", Path(memory) / "logs"), ("disk", base / "disk-logs")):
                for label, broker_mb, broker_rate, sink_mb, sink_rate in measure_cluster(
                        base / f"cluster-{kind}", log_dir, args, take):
                    print(f"{kind:<10}{label:<9}{broker_mb:>13.1f}{broker_rate:>14.0f}{sink_mb:>16.1f}"
                          f"{sink_rate:>17.0f}{broker_mb / sink_mb:>7.2f}x")
        finally:
            stop_process(sink)


def _reachable(take) -> bool:
    try:
        take(b"", timeout=1)
        return True
    except grpc.RpcError:
        return False


if __name__ == "__main__":
    main()
