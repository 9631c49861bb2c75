"""Benchmark: what watching a big cluster costs -- Prometheus scrapes of the broker, coordinator and
gateway, and the web console's JSON -- beside prometheus_client serving the same number of plain
samples from memory in the same run.

Starts its own cluster (`LocalCluster` with free ports in a temp dir: ZooKeeper, one controller,
`--brokers` brokers, one coordinator, one gateway), creates `--topics` topics of `--partitions`
partitions each (replication factor 1), writes one record to every partition, and commits offsets
for `--groups` groups (each on `--group-topics` topics, every partition at offset 0, so each has a
lag of 1 per partition). Then, `--rounds` times in turn, it times:

- `/metrics` of every broker, of the coordinator (lag per group and partition) and of the gateway;
- the console's `/ui/api/health`, `/ui/api/topics` (one page of 50), `/ui/api/groups` (a page of 10)
  and `/ui/api/series`;
- the peer: prometheus_client's own HTTP server exposing a registry holding, as plain gauges, as
  many samples as the largest broker scrape answered.

Prints min, median and max milliseconds and bytes of each, and the median broker scrape over the
peer's (what reading live state costs over formatting the same number of samples).

    python bench/observability.py [--brokers 1] [--topics 200] [--partitions 10] [--groups 20]
                                  [--group-topics 5] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from prometheus_client import CollectorRegistry, Gauge, start_http_server  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.lowlevel import LowLevelClient  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.topic_partition import TopicPartition  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import free_port, wait_until  # noqa: E402

STEP_TIMEOUT_S = 300
CLIENT_CONFIG = {"request_timeout_ms": 60000, "retry_backoff_ms": 100, "default_api_timeout_ms": 300000}


def fetch(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        body = answer.read()
    return time.perf_counter() - started, len(body)


def sample_count(url: str) -> int:
    with urllib.request.urlopen(url, timeout=60) as answer:
        text = answer.read().decode()
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


def peer_endpoint(samples: int) -> str:
    """prometheus_client serving `samples` gauge samples (100 per family, one label) on a free port."""
    registry = CollectorRegistry()
    families = max(1, samples // 100)
    for index in range(families):
        gauge = Gauge(f"peer_family_{index}", "A plain gauge.", ["partition"], registry=registry)
        for label in range(min(100, samples - index * 100)):
            gauge.labels(str(label)).set(label)
    port = free_port()
    start_http_server(port, addr="127.0.0.1", registry=registry)
    return f"http://127.0.0.1:{port}/metrics"


def set_up(cluster: LocalCluster, args) -> list[str]:
    topics = [f"obs-{index:04d}" for index in range(args.topics)]
    started = time.perf_counter()
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        admin.create_topics([NewTopic(topic, args.partitions, 1) for topic in topics],
                            timeout_ms=STEP_TIMEOUT_S * 1000)
        for topic in topics:
            admin.wait_for_topic(topic, STEP_TIMEOUT_S)
        batch = build_batch([b"x" * 100])
        with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
            results = client.produce_many({(t, p): batch for t in topics for p in range(args.partitions)}, acks=1,
                                          retry_timeout_ms=STEP_TIMEOUT_S * 1000)
        failed = [tp for tp, result in results.items() if result.error_code]
        if failed:
            raise RuntimeError(f"produce failed for {len(failed)} partitions, e.g. {failed[:3]}")
        for group in range(args.groups):
            chosen = [topics[(group * args.group_topics + k) % len(topics)] for k in range(args.group_topics)]
            admin.alter_consumer_group_offsets(
                f"obs-group-{group:02d}", {TopicPartition(t, p): 0 for t in chosen for p in range(args.partitions)})
    print(f"{args.topics} topics x {args.partitions} partitions on {args.brokers} broker(s), one record each, "
          f"{args.groups} groups x {args.group_topics} topics committed, set up in "
          f"{time.perf_counter() - started:.1f} s; {os.cpu_count()} CPUs", flush=True)
    return topics


def report(name: str, seconds: list[float], sizes: list[int]) -> float:
    median_ms = statistics.median(seconds) * 1000
    print(f"  {name:<42} {min(seconds) * 1000:8.1f} {median_ms:8.1f} {max(seconds) * 1000:8.1f} ms"
          f"  {statistics.median(sizes) / 1024:9.1f} KiB", flush=True)
    return median_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=10, help="partitions of each topic")
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--group-topics", type=int, default=5, help="topics each group committed offsets on")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=args.brokers, controllers=1, coordinators=1,
                               gateways=1, free_ports=True,
                               gateway_config={"ui.sample.interval.ms": 3000})
        try:
            cluster.start()
            set_up(cluster, args)
            gateway = cluster.gateway_url()
            coordinator_metrics = cluster.metrics_url(cluster.coordinator_names[0])
            wait_until(lambda: "odradek_consumer_group_lag{" in urllib.request.urlopen(
                coordinator_metrics, timeout=60).read().decode(), 60, 0.5, message="the coordinator's lag")
            targets = {f"{name} /metrics": cluster.metrics_url(name) for name in cluster.broker_names}
            targets["coordinator /metrics (lag)"] = coordinator_metrics
            targets["gateway /metrics"] = f"{gateway}/metrics"
            targets["console /ui/api/health"] = f"{gateway}/ui/api/health"
            targets["console /ui/api/topics (50)"] = f"{gateway}/ui/api/topics"
            targets["console /ui/api/groups (10)"] = f"{gateway}/ui/api/groups"
            targets["console /ui/api/series"] = f"{gateway}/ui/api/series"
            broker_samples = max(sample_count(cluster.metrics_url(name)) for name in cluster.broker_names)
            targets[f"peer: prometheus_client, {broker_samples:,} samples"] = peer_endpoint(broker_samples)
            for url in targets.values():  # warm every path once
                fetch(url)
            seconds: dict[str, list[float]] = {name: [] for name in targets}
            sizes: dict[str, list[int]] = {name: [] for name in targets}
            for _ in range(args.rounds):
                for name, url in targets.items():
                    elapsed, size = fetch(url)
                    seconds[name].append(elapsed)
                    sizes[name].append(size)
            print(f"{args.rounds} rounds: {'':>35} min   median      max       size")
            medians = {name: report(name, seconds[name], sizes[name]) for name in targets}
            peer = medians[next(name for name in targets if name.startswith("peer"))]
            for name in cluster.broker_names:
                print(f"  {name} scrape / peer's (same samples): {medians[f'{name} /metrics'] / peer:.2f}x")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
