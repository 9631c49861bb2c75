"""Benchmark: `odradek producer-perf-test` and `consumer-perf-test` beside the plain client loops they
measure, in the same run: the tools must not be what limits the figures users read from them.

Starts its own cluster (ZooKeeper, one controller, three brokers, one coordinator; the
`LocalCluster` launcher, free ports, a temp dir) and two topics of `--partitions` partitions: one
with replication factor 3 (min.insync.replicas=2), one with replication factor 1. For acks=all to
the first and acks=1 to the second, each round runs, in an order that alternates from round to
round:

- plain: a `Producer` (the same settings), `send(topic, value)` of `--records` records of
  `--record-size` bytes with no callback, then `flush()`; timed from after the producer is built
  to the end of the flush;
- tool: `producer-perf-test --throughput -1` in this process, through its function; its figure is
  the records/sec of its own summary line (timed from after its producer is built to the end of
  its close);
- tool (subprocess): the real `odradek producer-perf-test` command, as users run it; its figure is
  again its summary line (its interpreter's start-up is not in it, as the JVM's is not in Kafka's).

Before the rounds, a plain producer writes a fifth of `--records` to each topic: the first run on a
new cluster is slower whoever makes it. Then for each topic, alternately, `consumer-perf-test
--messages N` (a fresh group, from the earliest offset) beside a plain loop: a `Consumer` of a fresh
group subscribed to the topic, `poll()` until N records came, reading each record's value, timed
from after the consumer is built (the tool's nMsg.sec, whose clock starts there too, is its figure).

Prints records/s of each and the ratio tool / plain (target >= 0.8x) per round, then over all
rounds (records over the summed times). Beside each, the client's CPU per record relative to the
plain loop's (CPU time of this process, all threads, from building the client to closing it; for
the subprocess, its CPU less that of one that sends nothing, measured first: the interpreter's
start-up and imports). The tool's CPU includes its report after its clock stopped, as Kafka's does:
making and sorting its latency sample (500,001 values for 1,000,000 records, some 0.13 s). On a
shared machine the clock figures swing both ways from round to round; the consumer's CPU per record
holds steadier, the producer's less so, since slower brokers make larger batches and so less CPU
per record.

    python bench/perf_tools.py [--records 1000000] [--record-size 100] [--rounds 2] [--partitions 1]
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.clients import cli  # noqa: E402
from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.consumer import Consumer  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import wait_until  # noqa: E402

RATIO_TARGET = 0.8
REPLICATED = "perf-rf3"
UNREPLICATED = "perf-rf1"
SETUPS = {"acks=all RF=3": (REPLICATED, "all"), "acks=1   RF=1": (UNREPLICATED, "1")}
REPO = Path(__file__).resolve().parents[1]
INSTALLED = Path(sys.executable).parent / "odradek"  # the command `make setup` installs
ODRADEK = [str(INSTALLED)] if INSTALLED.exists() else [sys.executable, "-m", "services.clients.cli"]


def fully_replicated(admin: Admin, topic: str) -> bool:
    (description,) = admin.describe_topics([topic]).values()
    return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in description.partitions)


# --------------------------------------------------------------------------------------------- producer

@functools.cache
def plain_values(records: int, record_size: int) -> list[bytes]:
    """The plain loop's values, made once: 1024 random payloads in turn."""
    pool = [random.randbytes(record_size) for _ in range(1024)]
    return [pool[index & 1023] for index in range(records)]


def plain_producer(bootstrap: str, topic: str, acks: str, args) -> float:
    values = plain_values(args.records, args.record_size)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    try:
        send = producer.send
        start = time.perf_counter()
        for value in values:
            send(topic, value)
        producer.flush()
        return args.records / (time.perf_counter() - start)
    finally:
        producer.close()


def producer_tool_argv(bootstrap: str, topic: str, acks: str, args) -> list[str]:
    return ["producer-perf-test", "--topic", topic, "--num-records", str(args.records), "--record-size",
            str(args.record_size), "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
            f"acks={acks}"]


def summary_rate(output: str) -> float:
    """The records/sec of producer-perf-test's summary (its last line)."""
    line = output.strip().splitlines()[-1]
    if " 99.9th." not in line:
        raise RuntimeError(f"producer-perf-test printed no summary: {output[-2000:]}")
    return float(line.split(" records sent, ")[1].split(" records/sec")[0])


def producer_tool(bootstrap: str, topic: str, acks: str, args) -> float:
    out = io.StringIO()
    parsed = cli.build_parser().parse_args(producer_tool_argv(bootstrap, topic, acks, args))
    if parsed.run(parsed, out) != 0:
        raise RuntimeError(f"producer-perf-test failed: {out.getvalue()[-2000:]}")
    return summary_rate(out.getvalue())


def producer_tool_process(bootstrap: str, topic: str, acks: str, args) -> float:
    done = subprocess.run(ODRADEK + producer_tool_argv(bootstrap, topic, acks, args), cwd=REPO,
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"odradek producer-perf-test failed: {done.stderr[-2000:]}")
    return summary_rate(done.stdout)


PRODUCER_PEERS = {"plain": plain_producer, "tool": producer_tool, "tool (subprocess)": producer_tool_process}


# --------------------------------------------------------------------------------------------- consumer

def plain_consumer(bootstrap: str, topic: str, args) -> float:
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=f"plain-{random.randrange(10 ** 9)}",
                        auto_offset_reset="earliest")
    try:
        start = time.perf_counter()
        consumer.subscribe([topic])
        got = 0
        while got < args.records:
            for record in consumer.poll(timeout_ms=100):
                record.value  # noqa: B018 - each record is read, as an application would
                got += 1
        return got / (time.perf_counter() - start)
    finally:
        consumer.close()


def consumer_tool(bootstrap: str, topic: str, args) -> float:
    out = io.StringIO()
    parsed = cli.build_parser().parse_args(["consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                                            "--messages", str(args.records), "--hide-header"])
    if parsed.run(parsed, out) != 0:
        raise RuntimeError(f"consumer-perf-test failed: {out.getvalue()[-2000:]}")
    fields = [field.strip() for field in out.getvalue().strip().split(",")]
    if int(fields[4]) < args.records:
        raise RuntimeError(f"consumer-perf-test read {fields[4]} records of {args.records}")
    return float(fields[5])


CONSUMER_PEERS = {"plain": plain_consumer, "tool": consumer_tool}


# --------------------------------------------------------------------------------------------- report

class Run(NamedTuple):
    """One peer's run: records/s on the clock, and records per second of client CPU."""

    rate: float
    cpu_rate: float


def client_cpu_s() -> float:
    """CPU seconds of this process (all its threads) and of its finished children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def run_rounds(peers: dict, args, call, start_up_cpu_s: dict[str, float] | None = None) -> dict[str, list[Run]]:
    """Each peer once per round, in alternating order; `start_up_cpu_s` is CPU not to count per peer."""
    runs: dict[str, list[Run]] = {peer: [] for peer in peers}
    for round_index in range(args.rounds):
        order = list(peers) if round_index % 2 == 0 else list(reversed(peers))
        for peer in order:
            cpu_s = client_cpu_s() + (start_up_cpu_s or {}).get(peer, 0.0)
            rate = call(peers[peer])
            runs[peer].append(Run(rate, args.records / (client_cpu_s() - cpu_s)))
    return runs


def process_start_up_cpu_s(bootstrap: str, topic: str, acks: str, args) -> float:
    """The CPU of an `odradek producer-perf-test` that sends nothing: the interpreter's start-up and
    imports, and the producer's creation and close."""
    cpu_s = client_cpu_s()
    producer_tool_process(bootstrap, topic, acks, argparse.Namespace(**{**vars(args), "records": 0}))
    return client_cpu_s() - cpu_s


def ratio_cell(peer: str, value: float, plain: float) -> str:
    ratio = value / plain
    return f"{peer} {value:>9,.0f} ({ratio:.2f}x, {'meets' if ratio >= RATIO_TARGET else 'MISSES'})"


def report(kind: str, label: str, runs: dict[str, list[Run]]) -> None:
    tools = [peer for peer in runs if peer != "plain"]
    for round_index, plain in enumerate(runs["plain"]):
        cells = [ratio_cell(peer, runs[peer][round_index].rate, plain.rate) for peer in tools]
        cpu_cells = [f"{peer} {plain.cpu_rate / runs[peer][round_index].cpu_rate:.2f}x" for peer in tools]
        print(f"  {kind} {label} round {round_index + 1}: plain {plain.rate:>9,.0f}, " + ", ".join(cells)
              + " records/s; client CPU per record / plain's: " + ", ".join(cpu_cells), flush=True)
    if len(runs["plain"]) > 1:  # all rounds together: the same records over the summed times
        overall = {peer: len(values) / sum(1 / run.rate for run in values) for peer, values in runs.items()}
        cpu = {peer: len(values) / sum(1 / run.cpu_rate for run in values) for peer, values in runs.items()}
        cells = [ratio_cell(peer, overall[peer], overall["plain"]) for peer in tools]
        cpu_cells = [f"{peer} {cpu['plain'] / cpu[peer]:.2f}x" for peer in tools]
        print(f"  {kind} {label} all rounds: plain {overall['plain']:>9,.0f}, " + ", ".join(cells)
              + " records/s; client CPU per record / plain's: " + ", ".join(cpu_cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records per run")
    parser.add_argument("--record-size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per configuration (order alternates)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of each topic")
    parser.add_argument("--skip-consumer", action="store_true", help="only the producer comparison")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, controllers=1, coordinators=1, free_ports=True,
                               broker_config={"log.segment.bytes": 1 << 30},
                               coordinator_config={"group.initial.rebalance.delay.ms": 0})
        try:
            cluster.start()
            bootstrap = cluster.bootstrap_servers
            with Admin(bootstrap_servers=bootstrap) as admin:
                admin.create_topics([NewTopic(REPLICATED, args.partitions, 3, configs={"min.insync.replicas": "2"}),
                                     NewTopic(UNREPLICATED, args.partitions, 1)])
                for topic in (REPLICATED, UNREPLICATED):
                    admin.wait_for_topic(topic, 60, partitions=args.partitions)
                    wait_until(lambda t=topic: fully_replicated(admin, t), 60, 0.2,
                               message=f"every replica of {topic} in the ISR")
            print(f"{args.records:,} records x {args.record_size} B, {args.partitions} partition(s), "
                  f"{args.rounds} rounds in alternating order, {os.cpu_count()} CPUs; ratio = tool / plain "
                  f"(target >= {RATIO_TARGET}x)", flush=True)
            warm_up = argparse.Namespace(**{**vars(args), "records": max(1, args.records // 5)})
            for topic, acks in SETUPS.values():  # the first run on a new cluster is slow: not a measured one
                plain_producer(bootstrap, topic, acks, warm_up)
            for label, (topic, acks) in SETUPS.items():
                start_up_cpu_s = process_start_up_cpu_s(bootstrap, topic, acks, args)
                print(f"  {label}: odradek producer-perf-test sending nothing takes {start_up_cpu_s:.2f} s of CPU, "
                      f"not counted in its CPU per record", flush=True)
                rates = run_rounds(PRODUCER_PEERS, args, lambda peer, t=topic, a=acks: peer(bootstrap, t, a, args),
                                   {"tool (subprocess)": start_up_cpu_s})
                report("producer", label, rates)
            if not args.skip_consumer:
                for topic in (REPLICATED, UNREPLICATED):
                    rates = run_rounds(CONSUMER_PEERS, args, lambda peer, t=topic: peer(bootstrap, t, args))
                    report("consumer", topic, rates)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
