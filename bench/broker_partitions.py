"""Benchmark: what thousands of partitions cost a broker, on three brokers and one controller.

Starts its own cluster (ZooKeeper, one controller, three brokers; the `LocalCluster` launcher, free
ports, a temp dir), creates `--partitions` partitions with replication factor 3 in topics of at most
`--topic-partitions` partitions each, and prints, in one run:

1. the time from the first CreateTopics call until every partition has a leader, and until every
   ISR has 3 replicas (as the brokers' metadata shows them), and how long each broker took to apply
   its LeaderAndIsr requests (from the broker logs, where a broker logs it);
2. per broker, while every partition is idle: CPU% over `--idle-seconds`, starting
   `--settle-seconds` after the last change (so the one-time work a change leaves behind, such as
   the first checkpoints and fetch sessions, is not counted as idle), RSS (anonymous and
   file-backed; mmap'd index files count only where touched), virtual size, open file descriptors
   and threads, and the RSS once more after the idle window;
3. p50/p99 latency of `--produce-requests` sequential acks=all produces of one small batch to one
   partition, the others idle;
   and, on a one-partition topic "quiet" (RF=3), `--rounds` rounds each of the p50/p99 of such
   produces and of the records/s of a plain `Producer` loop (`--loop-records` records of 100 B,
   then flush): before the partitions are created ("without"), beside them ("with"), and once more
   after they are deleted and gone from every broker's disk ("deleted"). It prints every round, the
   medians of each set, and the ratios of the medians, with against without and with against
   deleted (targets: p99 at most 1.5x, the loop at least 0.8x); and each broker's idle CPU over
   windows of the same length without, with, with later on (after the produces below, past the
   one-time work the creation leaves) and after deletion (target: at most 2%);
4. a broker restart: SIGTERM (controlled shutdown) and start again, timed until the broker exits,
   until it serves again, and until every one of its replicas is back in its ISR; then the same
   after kill -9 (where the controller notices the death by the ZooKeeper session timeout, and the
   broker recovers its logs without a clean-shutdown marker).

    python bench/broker_partitions.py [--partitions 4000] [--topic-partitions 4000]
        [--idle-seconds 30] [--settle-seconds 10] [--produce-requests 300] [--loop-records 200000]
        [--rounds 3] [--no-restarts]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.common.pb.odradek.broker.v1 import broker_pb2  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.service import node_channel  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import pid_alive, wait_until  # noqa: E402

SESSION_TIMEOUT_MS = 6000
REPLICATION_FACTOR = 3
TOPIC_PREFIX = "scale"
QUIET_TOPIC = "quiet"
PRODUCE = "/odradek.broker.v1.BrokerService/Produce"
CLIENT_CONFIG = {"request_timeout_ms": 30000, "default_api_timeout_ms": 120000}
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
LEADER_AND_ISR_LOG = re.compile(r"applied LeaderAndIsr of (\d+) partitions .* in (\d+) ms")
LOADED_LOGS_LOG = re.compile(r"loaded (\d+) logs .* in (\d+) ms")
MIB = 1024 * 1024


# ---------------------------------------------------------------------- /proc


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S  # utime, stime


def status_fields(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, VmSize (bytes) and Threads of a process."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "VmSize"):
            out[name] = int(value.split()[0]) * 1024
        elif name == "Threads":
            out[name] = int(value)
    return out


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return f"{soft}/{hard}"
    return "?"


# ---------------------------------------------------------------------- cluster state


def partition_states(admin: Admin, topics: list[str]) -> list:
    descriptions = admin.describe_topics(topics, raise_errors=False).values()
    return [p for description in descriptions if not isinstance(description, Exception)
            for p in description.partitions]


def count_led_and_full(admin: Admin, topics: list[str]) -> tuple[int, int]:
    partitions = partition_states(admin, topics)
    led = sum(1 for p in partitions if p.leader >= 0)
    full = sum(1 for p in partitions if p.leader >= 0 and len(p.isr) == REPLICATION_FACTOR)
    return led, full


def wait_all_full(admin: Admin, topics: list[str], total: int, timeout_s: float) -> None:
    wait_until(lambda: count_led_and_full(admin, topics)[1] == total, timeout_s, 0.5,
               message=lambda: f"ISR = {REPLICATION_FACTOR} everywhere (now {count_led_and_full(admin, topics)})")


def log_matches(cluster: LocalCluster, name: str, pattern: re.Pattern, since: int) -> list[tuple[int, int]]:
    """(count, ms) of every line of the service's log after byte `since` matching `pattern`."""
    with open(cluster.log_path(name), "rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return [(int(m.group(1)), int(m.group(2))) for m in pattern.finditer(text)]


def log_size(cluster: LocalCluster, name: str) -> int:
    try:
        return cluster.log_path(name).stat().st_size
    except OSError:
        return 0


def describe_applies(matches: list[tuple[int, int]]) -> str:
    if not matches:
        return "not logged"
    partitions = sum(count for count, _ in matches)
    return (f"{len(matches)} requests, {partitions} partitions, {sum(ms for _, ms in matches)} ms in all, "
            f"slowest {max(ms for _, ms in matches)} ms")


# ---------------------------------------------------------------------- phases


def create(cluster: LocalCluster, admin: Admin, args) -> list[str]:
    sizes = []
    left = args.partitions
    while left > 0:
        sizes.append(min(left, args.topic_partitions))
        left -= sizes[-1]
    topics = [f"{TOPIC_PREFIX}-{i}" for i in range(len(sizes))]
    marks = {name: log_size(cluster, name) for name in cluster.broker_names}
    start = time.monotonic()
    for topic, size in zip(topics, sizes, strict=True):
        admin.create_topics([NewTopic(topic, size, REPLICATION_FACTOR)])
    created = time.monotonic() - start
    wait_until(lambda: count_led_and_full(admin, topics)[0] == args.partitions, args.timeout, 0.5,
               message=lambda: f"a leader everywhere (now {count_led_and_full(admin, topics)})")
    led = time.monotonic() - start
    wait_all_full(admin, topics, args.partitions, args.timeout)
    full = time.monotonic() - start
    applied_text = wait_applied(cluster, marks, args.partitions * REPLICATION_FACTOR // len(marks), start,
                                args.timeout)
    print(f"create: {args.partitions} partitions RF={REPLICATION_FACTOR} as {len(topics)} topics "
          f"of <= {args.topic_partitions}")
    print(f"  CreateTopics calls answered after {created:.2f} s; every partition led after {led:.2f} s; "
          f"every ISR = {REPLICATION_FACTOR} after {full:.2f} s (as the brokers' metadata shows them); "
          f"{applied_text}")
    for name in cluster.broker_names:
        print(f"  {name} LeaderAndIsr: {describe_applies(log_matches(cluster, name, LEADER_AND_ISR_LOG, marks[name]))}")
    return topics


def wait_applied(cluster: LocalCluster, marks: dict[str, int], replicas_per_broker: int, start: float,
                 timeout_s: float) -> str:
    """Waits until every broker logged LeaderAndIsr for all its replicas (the controller's view
    comes first); says when, or that the brokers do not log it."""

    def applied(name: str) -> int:
        return sum(count for count, _ in log_matches(cluster, name, LEADER_AND_ISR_LOG, marks[name]))

    if not any(applied(name) for name in marks):
        return "LeaderAndIsr applications not logged"
    wait_until(lambda: all(applied(name) >= replicas_per_broker for name in marks), timeout_s, 0.5,
               message="every broker to apply LeaderAndIsr for all its replicas")
    return f"every broker applied LeaderAndIsr for all its replicas after {time.monotonic() - start:.2f} s"


def measure_idle(cluster: LocalCluster, args, label: str) -> dict[str, float]:
    """Prints each broker's figures over an idle window that starts `--settle-seconds` after the
    last change; returns each broker's CPU%."""
    time.sleep(args.settle_seconds)
    pids = {name: cluster.running_pid(name) for name in cluster.broker_names}
    before = {name: (cpu_seconds(pid), status_fields(pid)) for name, pid in pids.items()}
    start = time.monotonic()
    time.sleep(args.idle_seconds)
    elapsed = time.monotonic() - start
    print(f"idle ({label}): {elapsed:.1f} s with every partition idle, from {args.settle_seconds:g} s "
          f"after the last change; load average {os.getloadavg()[0]:.2f}")
    cpus = {}
    for name, pid in pids.items():
        cpu_before, status_before = before[name]
        cpus[name] = cpu = (cpu_seconds(pid) - cpu_before) / elapsed * 100
        status = status_fields(pid)
        print(f"  {name}: CPU {cpu:5.2f}%  RSS {status['VmRSS'] / MIB:6.1f} MiB "
              f"(anon {status['RssAnon'] / MIB:.1f}, file {status['RssFile'] / MIB:.1f}; "
              f"{status_before['VmRSS'] / MIB:.1f} at the start of the window)  "
              f"virtual {status['VmSize'] / MIB / 1024:.1f} GiB  fds {open_fds(pid)} (limit {fd_limit(pid)})  "
              f"threads {status['Threads']}")
    return cpus


def measure_produce(cluster: LocalCluster, admin: Admin, topic: str, requests: int,
                    label: str = "the other partitions idle") -> tuple[float, float]:
    """Sequential acks=all produces of one record; prints and returns (p50, p99) in ms."""
    (description,) = admin.describe_topics([topic]).values()
    leader = next(p.leader for p in description.partitions if p.partition == 0)
    channel = node_channel(cluster.endpoint(cluster.broker_name(leader)))
    call = channel.unary_unary(PRODUCE, response_deserializer=broker_pb2.ProduceResponse.FromString)
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30000)
    request.topic_data.add(name=topic).partition_data.add(index=0, records=build_batch([b"x" * 100]))
    payload = request.SerializeToString()
    try:
        for _ in range(20):  # warm-up: connection, the followers' fetch sessions
            call(payload, timeout=30)
        latencies = []
        for _ in range(requests):
            start = time.perf_counter()
            reply = call(payload, timeout=30)
            latencies.append((time.perf_counter() - start) * 1000)
            code = reply.responses[0].partition_responses[0].error_code
            if code:
                raise RuntimeError(f"produce to {topic}-0 failed with error code {code}")
    finally:
        channel.close()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    p50 = statistics.median(latencies)
    print(f"produce: {requests} sequential acks=all produces of one 100 B record to {topic}-0 "
          f"(leader broker {leader}), {label}")
    print(f"  p50 {p50:.2f} ms  p99 {p99:.2f} ms  max {latencies[-1]:.2f} ms")
    return p50, p99


def measure_producer_loop(cluster: LocalCluster, topic: str, records: int, label: str) -> float:
    """A plain `Producer` loop of `records` 100 B records, then flush; prints and returns records/s."""
    value = b"x" * 100
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        send = producer.send
        start = time.perf_counter()
        for _ in range(records):
            send(topic, value)
        producer.flush()
        rate = records / (time.perf_counter() - start)
    finally:
        producer.close()
    print(f"producer loop: {records} records of 100 B to {topic}, {label}: {rate:,.0f} records/s")
    return rate


def measure_rounds(cluster: LocalCluster, admin: Admin, args, label: str) -> tuple[list[float], list[float]]:
    """`--rounds` rounds of the quiet topic's acks=all p99 and producer loop; returns both lists."""
    p99s, rates = [], []
    for round_number in range(1, args.rounds + 1):
        text = f"{label}, round {round_number} of {args.rounds}, load average {os.getloadavg()[0]:.2f}"
        p99s.append(measure_produce(cluster, admin, QUIET_TOPIC, args.produce_requests, text)[1])
        rates.append(measure_producer_loop(cluster, QUIET_TOPIC, args.loop_records, text))
    return p99s, rates


def delete(cluster: LocalCluster, admin: Admin, topics: list[str], timeout_s: float) -> None:
    """Deletes the topics and waits until no broker holds a directory of theirs (deleted logs are
    renamed, then removed `file.delete.delay.ms` later)."""
    start = time.monotonic()
    admin.delete_topics(topics)

    def left() -> int:
        prefixes = tuple(f"{topic}-" for topic in topics)
        return sum(1 for name in cluster.broker_names for entry in os.listdir(cluster.data_dir(name))
                   if entry.startswith(prefixes))

    wait_until(lambda: left() == 0, timeout_s, 1.0, message=lambda: f"the deleted topics' logs gone ({left()} left)")
    print(f"delete: {len(topics)} topics deleted and their logs gone from every broker after "
          f"{time.monotonic() - start:.1f} s")


def summarize(sets: dict[str, tuple[list[float], list[float]]], idle: dict[str, dict[str, float]]) -> None:
    """Every round, the medians of each set, the ratios of the medians, each broker's idle CPU."""
    sets = dict(sets)
    if "without" in sets and "deleted" in sets:  # both sets without the partitions, pooled
        sets["both"] = (sets["without"][0] + sets["deleted"][0], sets["without"][1] + sets["deleted"][1])
    medians = {label: (statistics.median(p99s), statistics.median(rates)) for label, (p99s, rates) in sets.items()}
    print("summary: the quiet topic's acks=all p99 (ms) and producer loop (records/s), every round and the median")
    for label, (p99s, rates) in sets.items():
        p99_median, rate_median = medians[label]
        print(f"  {label:>8}: p99 {', '.join(f'{v:.2f}' for v in p99s)} (median {p99_median:.2f}); "
              f"loop {', '.join(f'{v:,.0f}' for v in rates)} (median {rate_median:,.0f})")
    with_p99, with_rate = medians["with"]
    for baseline in (label for label in medians if label != "with"):
        p99, rate = medians[baseline]
        print(f"  with / {baseline}: acks=all p99 {with_p99 / p99:.2f}x (target <= 1.5x), "
              f"producer loop {with_rate / rate:.2f}x (target >= 0.8x)")
    print("summary: idle CPU% per broker, windows of the same length")
    for label, cpus in idle.items():
        print(f"  {label:>8}: " + "  ".join(f"{name} {cpu:.2f}%" for name, cpu in cpus.items())
              + f"  (busiest {max(cpus.values()):.2f}%, target <= 2%)")


def measure_restart(cluster: LocalCluster, admin: Admin, topics: list[str], total: int, broker_id: int,
                    how: str, timeout_s: float) -> None:
    name = cluster.broker_name(broker_id)
    pid = cluster.running_pid(name)
    start = time.monotonic()
    os.kill(pid, signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
    wait_until(lambda: not pid_alive(pid), timeout_s, 0.05, message=f"{name} to exit")
    exited = time.monotonic() - start
    if how == "SIGKILL":  # the controller's view: the broker's ZooKeeper session has to expire
        wait_until(lambda: count_led_and_full(admin, topics)[1] == 0, timeout_s, 0.5,
                   message=f"{name} out of every ISR")
    out_of_isr = time.monotonic() - start
    mark = log_size(cluster, name)
    started = time.monotonic()
    new_pid = cluster.start_service(name, wait=False)
    wait_until(lambda: cluster.is_serving(name) or not pid_alive(new_pid), timeout_s, 0.05,
               message=f"{name} to serve")
    if not pid_alive(new_pid):
        raise RuntimeError(f"{name} exited while starting")
    serving = time.monotonic() - started
    wait_all_full(admin, topics, total, timeout_s)
    back = time.monotonic() - started
    loaded = log_matches(cluster, name, LOADED_LOGS_LOG, mark)
    load_text = f"; log loading {loaded[-1][1]} ms for {loaded[-1][0]} logs" if loaded else ""
    applies = describe_applies(log_matches(cluster, name, LEADER_AND_ISR_LOG, mark))
    print(f"restart after {how} of {name}:")
    if how == "SIGTERM":
        print(f"  exited {exited:.2f} s after SIGTERM (controlled shutdown)")
    else:
        print(f"  out of every ISR {out_of_isr:.2f} s after the kill "
              f"(zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS})")
    print(f"  serving {serving:.2f} s after start{load_text}; every replica back in its ISR "
          f"{back:.2f} s after start")
    print(f"  LeaderAndIsr: {applies}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=4000)
    parser.add_argument("--topic-partitions", type=int, default=4000,
                        help="partitions of each topic created (default: one topic of them all)")
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--settle-seconds", type=float, default=10.0,
                        help="wait this long after the last change before an idle window starts")
    parser.add_argument("--produce-requests", type=int, default=300)
    parser.add_argument("--loop-records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of the quiet topic's produces and loop in each of the three sets")
    parser.add_argument("--no-restarts", action="store_true", help="skip the restart measurements")
    parser.add_argument("--timeout", type=float, default=600.0, help="patience of each wait, seconds")
    parser.add_argument("--keep", help="lay the cluster out in this directory and leave it there")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp) / "cluster"
        session = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS}
        cluster = LocalCluster(base, brokers=3, controllers=1, free_ports=True, broker_config=session,
                               controller_config=session)
        try:
            cluster.start()
            print(f"cluster: 3 brokers, 1 controller, {os.cpu_count()} CPUs, {base}")
            with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
                admin.create_topics([NewTopic(QUIET_TOPIC, 1, REPLICATION_FACTOR)])
                wait_all_full(admin, [QUIET_TOPIC], 1, args.timeout)
                idle = {"without": measure_idle(cluster, args, "before creation")}
                sets = {"without": measure_rounds(cluster, admin, args, "no other topic")}
                topics = create(cluster, admin, args)
                idle["with"] = measure_idle(cluster, args, "after creation")
                sets["with"] = measure_rounds(cluster, admin, args, f"beside {args.partitions} idle partitions")
                measure_produce(cluster, admin, topics[0], args.produce_requests)
                idle["later"] = measure_idle(cluster, args, "after the produces")
                if not args.no_restarts:
                    measure_restart(cluster, admin, topics, args.partitions, 3, "SIGTERM", args.timeout)
                    measure_restart(cluster, admin, topics, args.partitions, 3, "SIGKILL", args.timeout)
                    measure_idle(cluster, args, "after the restarts")
                delete(cluster, admin, topics, args.timeout)
                idle["deleted"] = measure_idle(cluster, args, "after deletion")
                sets["deleted"] = measure_rounds(cluster, admin, args, "the other topics deleted")
                summarize(sets, idle)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
