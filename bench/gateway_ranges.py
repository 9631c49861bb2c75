"""Benchmark: offset-range reads of one partition through the HTTP gateway, in JSON and as Arrow IPC
streams, beside our native Consumer reading the same records.

Starts its own cluster (`LocalCluster` with free ports in a temp dir: ZooKeeper, one controller, one
broker, one coordinator, one uvicorn gateway), writes `--records` records of `--record-size` bytes
(our Producer, uncompressed, null keys, no headers) into one partition, then for `--rounds` rounds,
in an order that alternates, reads the whole partition:

- json: `GET .../partitions/0/records?offset=&max_bytes=` pages (`--max-bytes` each), following
  `next_offset`, each answer parsed (`response.json()`) and its records counted;
- arrow: the same pages with `Accept: application/vnd.apache.arrow.stream`, each answer decoded by
  pyarrow (`ipc.open_stream(...).read_all()`), its rows counted;
- consumer: a `Consumer` assigned the partition from offset 0, `poll()` until every record came,
  reading each record's value.

Each is timed from its first request to its last record. Prints records/s of each per round and over
all rounds, and the ratios against the targets (Arrow >= 5x JSON, Arrow >= 0.5x the Consumer).

    python bench/gateway_ranges.py [--records 1000000] [--record-size 100] [--rounds 2] [--max-bytes 8388608]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx  # noqa: E402
import pyarrow as pa  # noqa: E402

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.consumer import Consumer  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.common.topic_partition import TopicPartition  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402

TOPIC = "ranges-bench"
ARROW_OVER_JSON_TARGET = 5.0
ARROW_OVER_CONSUMER_TARGET = 0.5


def produce(bootstrap: str, args) -> None:
    pool = [random.randbytes(args.record_size) for _ in range(1024)]
    with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=5, batch_size=256 * 1024) as producer:
        send = producer.send
        for index in range(args.records):
            send(TOPIC, pool[index & 1023], partition=0)
        producer.flush()


def read_json(http: httpx.Client, path: str, args) -> int:
    offset = got = 0
    while got < args.records:
        body = http.get(path, params={"offset": offset, "max_bytes": args.max_bytes}).json()
        got += len(body["records"])
        offset = body["next_offset"]
    return got


def read_arrow(http: httpx.Client, path: str, args) -> int:
    offset = got = 0
    headers = {"Accept": "application/vnd.apache.arrow.stream"}
    while got < args.records:
        response = http.get(path, params={"offset": offset, "max_bytes": args.max_bytes}, headers=headers)
        got += pa.ipc.open_stream(response.content).read_all().num_rows
        offset = int(response.headers["X-Odradek-Next-Offset"])
    return got


def read_consumer(bootstrap: str, args) -> int:
    consumer = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = 0
        while got < args.records:
            for record in consumer.poll(timeout_ms=100):
                record.value  # noqa: B018 - each record is read, as an application would
                got += 1
        return got
    finally:
        consumer.close()


def timed(read) -> float:
    start = time.perf_counter()
    got = read()
    return got / (time.perf_counter() - start)


def verdict(ratio: float, target: float) -> str:
    return f"{ratio:.2f}x ({'meets' if ratio >= target else 'MISSES'} >= {target}x)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-bytes", type=int, default=8 * 1024 * 1024, help="max_bytes of each range read")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=1, controllers=1, coordinators=1, gateways=1,
                               free_ports=True, broker_config={"log.segment.bytes": 1 << 30})
        try:
            cluster.start()
            bootstrap = cluster.bootstrap_servers
            with Admin(bootstrap_servers=bootstrap) as admin:
                admin.create_topics([NewTopic(TOPIC, 1, 1)])
                admin.wait_for_topic(TOPIC, 60)
            started = time.perf_counter()
            produce(bootstrap, args)
            print(f"{args.records:,} records x {args.record_size} B written in {time.perf_counter() - started:.1f} s; "
                  f"{args.rounds} rounds in alternating order, pages of max_bytes={args.max_bytes:,}, "
                  f"{os.cpu_count()} CPUs", flush=True)
            with httpx.Client(base_url=cluster.gateway_url(), timeout=120) as http:
                cluster_id = http.get("/health").json()["cluster_id"]
                path = f"/v3/clusters/{cluster_id}/topics/{TOPIC}/partitions/0/records"
                readers = {"json": lambda: read_json(http, path, args), "arrow": lambda: read_arrow(http, path, args),
                           "consumer": lambda: read_consumer(bootstrap, args)}
                read_arrow(http, path, argparse.Namespace(**{**vars(args), "records": 1}))  # warm the gateway up
                rates: dict[str, list[float]] = {name: [] for name in readers}
                for round_index in range(args.rounds):
                    order = list(readers) if round_index % 2 == 0 else list(reversed(readers))
                    for name in order:
                        rates[name].append(timed(readers[name]))
                    report(f"round {round_index + 1}", {name: values[-1] for name, values in rates.items()})
                overall = {name: len(values) / sum(1 / rate for rate in values) for name, values in rates.items()}
                report("all rounds", overall)
        finally:
            cluster.stop()


def report(label: str, rates: dict[str, float]) -> None:
    print(f"  {label}: json {rates['json']:>10,.0f}, arrow {rates['arrow']:>10,.0f}, "
          f"consumer {rates['consumer']:>10,.0f} records/s; arrow/json "
          f"{verdict(rates['arrow'] / rates['json'], ARROW_OVER_JSON_TARGET)}, arrow/consumer "
          f"{verdict(rates['arrow'] / rates['consumer'], ARROW_OVER_CONSUMER_TARGET)}", flush=True)


if __name__ == "__main__":
    main()
