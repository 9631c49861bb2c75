"""Benchmark: Odradek's Producer and Consumer beside Redis Streams, the same workload in one run.

Starts ZooKeeper, one controller and three brokers (one with `--no-rf3`; the `LocalCluster` launcher,
log.dirs on disk, in a temp dir) and a `redis-server` (Debian package) on a free port with `appendonly yes` and
`appendfsync everysec`, then for 100-byte records, one partition / one stream, one producer and one
consumer, measures:

- produce: `Producer.send()` of N records then `flush()` (defaults: acks=all, idempotence on) beside
  redis-py `XADD` pipelined `--batch` commands at a time, each side until everything is acknowledged;
- consume: `Consumer.poll()` (`max.poll.records` = `--batch`) of the N records, reading each
  record's value, beside redis-py
  `XREAD COUNT --batch` and, since XREAD cannot be pipelined (each call needs the last id of the
  previous one), `XREADGROUP ... >` pipelined 8 deep; the ratio is taken against the faster of the two;
- end to end, first, while both systems are idle (a Redis AOF rewrite after the throughput runs
  would disturb whichever system is measured then): a producer process sends `--rate` records/s
  for `--latency-seconds` while this one polls; each value carries its send time (the monotonic
  clock both processes share), so latency is send -> poll. Redis: XADD each record as it is due,
  XREAD BLOCK on the other side. Each sender process reports the CPU it used while sending (and
  flushing), as a share of the time that took.

With `--rf3` (the default) the cluster has three brokers, every topic is led by broker 1, and
the end-to-end run is repeated on an RF=3 topic (acks=all waits for both followers). Beside the
latencies each Odradek run prints its Produce and Fetch requests a second and the CPU per record of
the sender process, the polling process and each broker (/proc/<pid>/stat). `--linger-ms` gives
the Producer's `linger.ms` values to run the end-to-end rows with: 0, the default of Kafka 3.x's
producer and Odradek's, and 5, the default since Kafka 4.0 (KIP-1030), whose fuller requests cost
the sender and the broker less CPU per record.

Rounds alternate which system goes first. redis-py uses the hiredis parser when it is installed.

    python bench/peers.py [--records 200000] [--batch 1000] [--rounds 2] [--rate 10000] [--no-rf3]
        [--linger-ms 0,5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from replication import producer_rate  # noqa: E402  (bench/replication.py: one plain producer loop)

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.consumer import Consumer  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import free_port, start_process, stop_process, wait_until  # noqa: E402

RECORD_SIZE = 100
STAMP = struct.Struct(">q")


def start_redis(base: Path) -> tuple[subprocess.Popen, int]:
    server = "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else "redis-server"
    port = free_port()
    data = base / "redis"
    data.mkdir()
    process = start_process([server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
                             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                             "--daemonize", "no"], base / "redis.log")
    return process, port


def redis_client(port: int):
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    wait_until(lambda: _pings(client), 30, 0.05, message="redis-server to answer")
    return client


def _pings(client) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


# --------------------------------------------------------------------------------------------- odradek

def odradek_consume(bootstrap: str, topic: str, start_offset: int, count: int, batch: int, **config) -> float:
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=bootstrap, max_poll_records=batch, **config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, start_offset)
        got = 0
        start = time.perf_counter()
        while got < count:
            for record in consumer.poll(timeout_ms=1000):
                record.value  # noqa: B018 - each record is read, as the Redis side reads each entry
                got += 1
        return got / (time.perf_counter() - start)


def odradek_latency(bootstrap: str, topic: str, rate: int, seconds: float, base: Path,
                    brokers: dict[str, int], linger_ms: int = 0) -> tuple[list[tuple[int, float]], dict[str, float]]:
    """(send time ns, latency ms) of each record of one paced run, and what it cost: requests and
    CPU per record of the sender process, this polling process and each broker (`brokers`: name ->
    pid)."""
    tp = TopicPartition(topic, 0)
    total = int(rate * seconds)
    latencies: list[tuple[int, float]] = []
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        consumer.position(tp)
        before = consumer.metrics()
        cpu_before = {name: process_cpu_s(pid) for name, pid in {**brokers, "consumer": os.getpid()}.items()}
        sender = start_sender(base, "odradek", bootstrap, topic, rate, seconds, linger_ms)
        try:
            deadline = time.perf_counter() + seconds + 60
            while len(latencies) < total and time.perf_counter() < deadline:
                for record in consumer.poll(timeout_ms=100):
                    sent_ns = STAMP.unpack_from(record.value)[0]
                    latencies.append((sent_ns, (time.perf_counter_ns() - sent_ns) / 1e6))
            cpu_after = {name: process_cpu_s(pid) for name, pid in {**brokers, "consumer": os.getpid()}.items()}
            after = consumer.metrics()
            sender.wait(timeout=60)
        finally:
            stop_process(sender)
    cost = sender_report(base / "sender-odradek.log")
    records = max(len(latencies), 1)
    fetches = after["fetch-total"] - before["fetch-total"]
    cost["fetch_per_s"] = fetches / seconds
    cost["fetch_ms"] = ((after["fetch-latency-avg"] * after["fetch-total"] - before["fetch-latency-avg"]
                         * before["fetch-total"]) / max(fetches, 1))
    cost["records_per_fetch"] = len(latencies) / max(fetches, 1)
    for name in cpu_before:
        cost[f"{name}_us"] = (cpu_after[name] - cpu_before[name]) * 1e6 / records
    return latencies, cost


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SENDER_REPORT = "sender report: "


def sender_report(log: Path) -> dict[str, float]:
    """The last report line the sender process wrote to its log (see `run_sender`)."""
    lines = [line for line in log.read_text().splitlines() if line.startswith(SENDER_REPORT)]
    return json.loads(lines[-1][len(SENDER_REPORT):]) if lines else {}


def finish_sender(sender, timeout_s: float = 30.0) -> None:
    """Lets the sender finish (so it reports its CPU), then stops it if it has not."""
    try:
        sender.wait(timeout_s)
    except subprocess.TimeoutExpired:
        pass
    stop_process(sender)


def sender_cpu(base: Path, system: str) -> str:
    """What the sender of `system` reported of its CPU, or why there is nothing."""
    lines = [line for line in (base / f"sender-{system}.log").read_text().splitlines() if line.startswith("cpu ")]
    if not lines:
        return "not reported"
    cpu_s, wall_s = (float(word) for word in lines[-1].split()[1:3])
    return f"{cpu_s:.2f} s CPU over {wall_s:.2f} s sending ({100 * cpu_s / wall_s:.0f}%)"


def start_sender(base: Path, system: str, target: str, name: str, rate: int, seconds: float, linger_ms: int = 0):
    """The paced sender of a latency run, in a process of its own as a real producer would be."""
    return start_process([sys.executable, os.path.abspath(__file__), "--latency-sender", system, target, name,
                          str(rate), str(seconds), str(linger_ms)], base / f"sender-{system}.log")


def run_sender(system: str, target: str, name: str, rate: int, seconds: float, linger_ms: int = 0) -> None:
    total = int(rate * seconds)
    if system == "odradek":
        with Producer(bootstrap_servers=target, linger_ms=linger_ms) as producer:
            producer.send(name, b"\0" * RECORD_SIZE, partition=1).get(timeout=30)  # connected and ready
            requests_before = producer.metrics()["request-total"]
            cpu_before = sum(os.times()[:2])
            paced(lambda value: producer.send(name, value, partition=0), rate, total)
            producer.flush()
            metrics = producer.metrics()
            requests = metrics["request-total"] - requests_before
            report = {"produce_per_s": requests / seconds, "records_per_produce": total / max(requests, 1),
                      "produce_ms": metrics["request-latency-avg"],
                      "sender_us": (sum(os.times()[:2]) - cpu_before) * 1e6 / total}
            print(SENDER_REPORT + json.dumps(report), flush=True)
    else:
        import redis

        writer = redis.Redis(host="127.0.0.1", port=int(target))
        writer.ping()
        cpu_s, wall_s = time.process_time(), time.perf_counter()
        paced(lambda value: writer.xadd(name, {"v": value}), rate, total)
        print(f"cpu {time.process_time() - cpu_s:.3f} {time.perf_counter() - wall_s:.3f}", flush=True)
        writer.close()


def paced(send, rate: int, total: int, flush=None) -> None:
    """Calls `send(value)` `total` times at `rate` per second; each value starts with its send time."""
    padding = b"p" * (RECORD_SIZE - STAMP.size)
    start = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            send(STAMP.pack(time.perf_counter_ns()) + padding)
            sent += 1
        if flush is not None:
            flush()
        time.sleep(0.0005)


# --------------------------------------------------------------------------------------------- redis

def redis_produce(client, stream: str, values: list[bytes], batch: int) -> float:
    start = time.perf_counter()
    for i in range(0, len(values), batch):
        pipe = client.pipeline(transaction=False)
        for value in values[i:i + batch]:
            pipe.xadd(stream, {"v": value})
        pipe.execute()
    return len(values) / (time.perf_counter() - start)


def redis_xread(client, stream: str, count: int, batch: int) -> float:
    last, got = "0-0", 0
    start = time.perf_counter()
    while got < count:
        entries = client.xread({stream: last}, count=batch)[0][1]
        for _, fields in entries:
            fields[b"v"]  # noqa: B018
            got += 1
        last = entries[-1][0]
    return got / (time.perf_counter() - start)


def redis_xreadgroup(client, stream: str, count: int, batch: int, depth: int = 8) -> float:
    group = f"g{time.monotonic_ns()}"
    client.xgroup_create(stream, group, id="0")
    got = 0
    start = time.perf_counter()
    while got < count:
        pipe = client.pipeline(transaction=False)
        for _ in range(depth):
            pipe.xreadgroup(group, "c", {stream: ">"}, count=batch, noack=True)
        for reply in pipe.execute():
            for _, fields in reply[0][1] if reply else ():
                fields[b"v"]  # noqa: B018
                got += 1
    return got / (time.perf_counter() - start)


def redis_latency(client, port: int, stream: str, rate: int, seconds: float, base: Path) -> list[tuple[int, float]]:
    total = int(rate * seconds)
    last = client.xinfo_stream(stream)["last-generated-id"] if client.exists(stream) else "0-0"
    latencies: list[tuple[int, float]] = []
    sender = start_sender(base, "redis", str(port), stream, rate, seconds)
    try:
        deadline = time.perf_counter() + seconds + 60
        while len(latencies) < total and time.perf_counter() < deadline:
            reply = client.xread({stream: last}, count=1000, block=100)
            for entry_id, fields in reply[0][1] if reply else ():
                sent_ns = STAMP.unpack_from(fields[b"v"])[0]
                latencies.append((sent_ns, (time.perf_counter_ns() - sent_ns) / 1e6))
                last = entry_id
    finally:
        finish_sender(sender)
    return latencies


# --------------------------------------------------------------------------------------------- run

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def after_first_second(timed: list[tuple[int, float]]) -> list[float]:
    """The latencies of records sent a second or more after the first one: without the start of
    the sender (its first requests, a partition's first batch alone in flight)."""
    if not timed:
        return []
    start_ns = min(sent_ns for sent_ns, _ in timed)
    return [ms for sent_ns, ms in timed if sent_ns - start_ns >= 1_000_000_000]


def make_values(count: int) -> list[bytes]:
    body = os.urandom(RECORD_SIZE - 8)
    return [STAMP.pack(i) + body for i in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--batch", type=int, default=1000, help="XADD pipeline depth, XREAD COUNT, max.poll.records")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=int, default=10000, help="records/s of the end-to-end latency run")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--rf3", action=argparse.BooleanOptionalAction, default=True,
                        help="three brokers, and the end-to-end run on an RF=3 topic (acks=all) too")
    parser.add_argument("--linger-ms", default="0,5",
                        help="comma-separated linger.ms values of the end-to-end runs' Producer")
    parser.add_argument("--latency-sender", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.latency_sender:
        system, target, name, rate, seconds, linger_ms = args.latency_sender
        run_sender(system, target, name, int(rate), float(seconds), int(linger_ms))
        return 0
    import redis

    try:
        import hiredis  # noqa: F401
        parser_name = "hiredis"
    except ImportError:
        parser_name = "python"
    values = make_values(args.records)
    rows: dict[str, list[tuple[float, float]]] = {"produce": [], "consume": []}
    with tempfile.TemporaryDirectory(prefix="odradek-peers-") as tmp:
        base = Path(tmp)
        brokers = 3 if args.rf3 else 1
        cluster = LocalCluster(base / "cluster", brokers=brokers, controllers=1, free_ports=True,
                               broker_config={"log.segment.bytes": 1 << 30})
        redis_process, redis_port = start_redis(base)
        try:
            cluster.start()
            bootstrap = cluster.bootstrap_servers
            topics = [NewTopic("peers", replica_assignment={0: [1]}),
                      NewTopic("latency", replica_assignment={0: [1], 1: [1]})]
            if args.rf3:  # led by broker 1 too, its followers the other two
                topics.append(NewTopic("latency-rf3", replica_assignment={0: [1, 2, 3], 1: [1, 2, 3]}))
            with Admin(bootstrap_servers=bootstrap) as admin:
                admin.create_topics(topics)
            pids = {name: int(cluster.pid_path(name).read_text()) for name in cluster.broker_names}
            client = redis_client(redis_port)
            version = client.info("server")["redis_version"]
            print(f"{args.records} records of {RECORD_SIZE} B, one partition / stream, batch {args.batch}; "
                  f"redis-server {version} (appendonly, everysec), redis-py {redis.__version__} "
                  f"with the {parser_name} parser; Odradek: {brokers} broker(s), Producer defaults "
                  f"(acks=all, idempotent) with linger.ms {args.linger_ms}")
            runs = []
            for linger_ms in (int(value) for value in args.linger_ms.split(",")):
                runs.append((f"odradek RF=1 L{linger_ms}", odradek_latency(
                    bootstrap, "latency", args.rate, args.latency_seconds, base, pids, linger_ms)))
                if args.rf3:
                    runs.append((f"odradek RF=3 L{linger_ms}", odradek_latency(
                        bootstrap, "latency-rf3", args.rate, args.latency_seconds, base, pids, linger_ms)))
            runs.append(("redis", (redis_latency(client, redis_port, "latency", args.rate, args.latency_seconds,
                                                 base), {})))
            print(f"end to end at {args.rate} records/s for {args.latency_seconds:g} s (send -> poll), ms; "
                  f"'1s+': the records sent after the run's first second")
            print("'L5': the Producer's linger.ms 5")
            print(f"{'system':<18}{'records':>9}{'p50':>8}{'p99':>8}{'p99.9':>8}{'max':>8}{'mean':>8}"
                  f"{'p50 1s+':>9}{'p99 1s+':>9}")
            for name, (timed, _) in runs:
                found = [ms for _, ms in timed]
                later = after_first_second(timed)
                print(f"{name:<18}{len(found):>9}{percentile(found, 0.5):>8.2f}{percentile(found, 0.99):>8.2f}"
                      f"{percentile(found, 0.999):>8.2f}{max(found, default=float('nan')):>8.2f}"
                      f"{statistics.fmean(found) if found else float('nan'):>8.2f}"
                      f"{percentile(later, 0.5):>9.2f}{percentile(later, 0.99):>9.2f}")
            print("target: odradek RF=1 p99 <= 5 ms (RF=3 acks=all beside it)")
            for name, (_, cost) in runs:
                if cost:
                    print(f"{name}: {cost.get('produce_per_s', 0):,.0f} Produce/s "
                          f"({cost.get('records_per_produce', 0):.1f} records each, {cost.get('produce_ms', 0):.1f} ms "
                          f"mean), {cost['fetch_per_s']:,.0f} Fetch/s ({cost['records_per_fetch']:.1f} records each, "
                          f"{cost['fetch_ms']:.1f} ms mean); CPU per record, us: "
                          + ", ".join(f"{key[:-3]} {value:.1f}" for key, value in cost.items() if key.endswith("_us")))
            print(f"redis sender process: {sender_cpu(base, 'redis')}")
            offset = 1  # the warm-up record
            for round_index in range(args.rounds):
                stream = f"s{round_index}"
                order = ("odradek", "redis") if round_index % 2 == 0 else ("redis", "odradek")
                produced: dict[str, float] = {}
                consumed: dict[str, float] = {}
                for side in order:
                    if side == "odradek":
                        produced[side] = producer_rate(bootstrap, "peers", values)
                        consumed[side] = odradek_consume(bootstrap, "peers", offset, args.records, args.batch)
                        offset += args.records + 1
                    else:
                        produced[side] = redis_produce(client, stream, values, args.batch)
                        xread = redis_xread(client, stream, args.records, args.batch)
                        xgroup = redis_xreadgroup(client, stream, args.records, args.batch)
                        consumed[side] = max(xread, xgroup)
                        print(f"  round {round_index + 1}: redis XREAD {xread:,.0f} rec/s, "
                              f"XREADGROUP pipelined {xgroup:,.0f} rec/s")
                rows["produce"].append((produced["odradek"], produced["redis"]))
                rows["consume"].append((consumed["odradek"], consumed["redis"]))
            print(f"{'workload':<36}{'round':>6}{'odradek rec/s':>15}{'redis rec/s':>13}{'ratio':>8}{'target':>8}")
            for name, label in (("produce", "Producer.send vs XADD pipelined"),
                                ("consume", "Consumer.poll vs best XREAD")):
                for i, (ours, peer) in enumerate(rows[name]):
                    print(f"{label:<36}{i + 1:>6}{ours:>15,.0f}{peer:>13,.0f}{ours / peer:>7.2f}x{'2x':>8}")
            client.close()
        finally:
            stop_process(redis_process)
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
