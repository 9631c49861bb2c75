"""Benchmark: the HTTP gateway beside the native clients, in one run on one cluster.

Starts its own cluster (ZooKeeper, one controller, three brokers, one coordinator and one gateway;
the `LocalCluster` launcher, free ports, a temp dir) and a topic of `--partitions` partitions
(replication factor 1), then measures, in records/s:

- native produce: a `Producer` (acks=all, idempotent: the gateway's own settings) sending
  `--records` records of `--record-size` bytes, then `flush()`;
- v2 produce: `--clients` threads, each with a keep-alive HTTP connection, POSTing
  `/topics/{topic}` bodies of `--batch` records in the binary embedded format (base64 values) and
  in the JSON one (string values), until `--records` records are written (bodies are built before
  the clock starts: the gateway is measured, not the client's JSON encoding);
- v3 streaming produce: one chunked `POST /v3/clusters/{c}/topics/{topic}/records` of `--records`
  JSON records, its delivery reports read as they come;
- range reads (`--range-records` records of `--record-size` bytes in one partition), with the
  readers of `bench/gateway_ranges.py`: the offset-range endpoint read to the end in JSON and in
  Arrow (8 MiB pages), and a native `Consumer` reading the same partition, two rounds in
  alternating order.

Prints each figure and the ratios against the native client measured in the same run (targets:
v2 produce >= 0.25x native produce; Arrow >= 5x JSON and >= 0.5x the native Consumer).

    python bench/gateway.py [--records 200000] [--record-size 100] [--clients 8] [--batch 500]
                            [--range-records 1000000] [--partitions 1] [--workers 1]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gateway_ranges as ranges  # noqa: E402

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import free_port  # noqa: E402

V2_BINARY = "application/vnd.kafka.binary.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"


def native_produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    value = b"x" * size
    with Producer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5) as producer:
        started = time.perf_counter()
        for _ in range(records):
            producer.send(topic, value)
        producer.flush()
        return records / (time.perf_counter() - started)


def v2_produce(url: str, topic: str, records: int, size: int, clients: int, batch: int, media: str) -> float:
    if media == V2_BINARY:
        value = base64.b64encode(b"x" * size).decode()
    else:
        value = "x" * size
    body = json.dumps({"records": [{"value": value}] * batch}).encode()
    requests = records // batch
    errors: list[str] = []
    counter = iter(range(requests))
    lock = threading.Lock()

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=60, headers={"Content-Type": media}) as http:
            while True:
                with lock:
                    if next(counter, None) is None:
                        return
                answer = http.post(f"/topics/{topic}", content=body)
                if answer.status_code != 200:
                    errors.append(f"{answer.status_code} {answer.text[:200]}")
                    return

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"v2 produce failed: {errors[0]}")
    return requests * batch / elapsed


def v3_streaming_produce(url: str, cluster_id: str, topic: str, records: int, size: int) -> float:
    """One chunked request of `records` JSON records, its reports read while the body is still being
    sent (full duplex, over a plain socket: httpx sends a whole body before it reads an answer, and the
    gateway stops reading a stream whose unanswered records reach its bound)."""
    line = json.dumps({"value": {"type": "BINARY", "data": base64.b64encode(b"x" * size).decode()}}).encode()
    chunk = line * 100
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.sendall(f"POST /v3/clusters/{cluster_id}/topics/{topic}/records HTTP/1.1\r\nHost: {host}\r\n"
                 "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode())

    def send_body() -> None:
        framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        for _ in range(records // 100):
            sock.sendall(framed)
        sock.sendall(b"0\r\n\r\n")

    started = time.perf_counter()
    writer = threading.Thread(target=send_body, daemon=True)
    writer.start()
    reader = sock.makefile("rb")
    status = reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"v3 streaming produce failed: {status!r}")
    while reader.readline() not in (b"\r\n", b""):
        pass  # response headers
    reports = 0
    pending = b""
    while reports < records // 100 * 100:
        size_line = reader.readline()
        length = int(size_line.strip() or b"0", 16)
        if length == 0:
            break
        pending += reader.read(length)
        reader.readline()  # the CRLF after the chunk
        *complete, pending = pending.split(b"\r\n")
        for report in complete:
            if report.strip():
                if json.loads(report).get("error_code") != 200:
                    raise RuntimeError(f"v3 streaming produce: {report[:200]!r}")
                reports += 1
    elapsed = time.perf_counter() - started
    writer.join(10)
    sock.close()
    if reports != records // 100 * 100:
        raise RuntimeError(f"v3 streaming produce: {reports} reports for {records} records")
    return reports / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per produce run")
    parser.add_argument("--record-size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients of v2 produce")
    parser.add_argument("--batch", type=int, default=500, help="records per v2 produce request")
    parser.add_argument("--range-records", type=int, default=1_000_000, help="records of the range reads")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the produce topic")
    parser.add_argument("--workers", type=int, default=1, help="the gateway's worker processes (num.workers)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        workers = {"num.workers": args.workers, "worker.base.port": free_port()} if args.workers > 1 else {}
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, controllers=1, coordinators=1, gateways=1,
                               free_ports=True, broker_config={"log.segment.bytes": 1 << 30}, gateway_config=workers)
        try:
            cluster.start()
            bootstrap, url = cluster.bootstrap_servers, cluster.gateway_url()
            with Admin(bootstrap_servers=bootstrap) as admin:
                admin.create_topics([NewTopic("produce", args.partitions, 1), NewTopic(ranges.TOPIC, 1, 1)])
                for topic in ("produce", ranges.TOPIC):
                    admin.wait_for_topic(topic, 60)
                cluster_id = admin.describe_cluster().cluster_id
            print(f"{args.records:,} records x {args.record_size} B per produce run, {args.clients} HTTP clients, "
                  f"{args.workers} gateway worker(s), "
                  f"{args.batch} records per v2 request, {os.cpu_count()} CPUs", flush=True)
            native_produce(bootstrap, "produce", args.records // 5, args.record_size)  # warm-up
            native = native_produce(bootstrap, "produce", args.records, args.record_size)
            print(f"  native Producer:          {native:12,.0f} records/s", flush=True)
            for label, media in (("v2 produce, binary", V2_BINARY), ("v2 produce, json", V2_JSON)):
                rate = v2_produce(url, "produce", args.records, args.record_size, args.clients, args.batch, media)
                print(f"  {label + ':':25} {rate:12,.0f} records/s  {rate / native:5.2f}x native "
                      f"(target >= 0.25x)", flush=True)
            rate = v3_streaming_produce(url, cluster_id, "produce", args.records, args.record_size)
            print(f"  v3 streaming produce:     {rate:12,.0f} records/s  {rate / native:5.2f}x native", flush=True)

            range_args = argparse.Namespace(records=args.range_records, record_size=args.record_size,
                                             max_bytes=8 * 1024 * 1024)
            ranges.produce(bootstrap, range_args)
            print(f"range reads of {args.range_records:,} records x {args.record_size} B, one partition "
                  f"(bench/gateway_ranges.py's readers, in alternating order)", flush=True)
            with httpx.Client(base_url=url, timeout=120) as http:
                path = f"/v3/clusters/{cluster_id}/topics/{ranges.TOPIC}/partitions/0/records"
                readers = {"json": lambda: ranges.read_json(http, path, range_args),
                           "arrow": lambda: ranges.read_arrow(http, path, range_args),
                           "consumer": lambda: ranges.read_consumer(bootstrap, range_args)}
                rates = {name: [] for name in readers}
                for round_index in range(2):
                    for name in (list(readers) if round_index % 2 == 0 else list(reversed(readers))):
                        rates[name].append(ranges.timed(readers[name]))
                ranges.report("2 rounds", {name: len(values) / sum(1 / rate for rate in values)
                                           for name, values in rates.items()})
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
