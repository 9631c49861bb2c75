"""Benchmark: how long a consumer group takes to become Stable again after a member joins and
after a member is killed.

Starts its own cluster (ZooKeeper, one controller, three brokers, two coordinators; the
`LocalCluster` launcher, free ports, a temp dir) and a 6-partition topic. Each round starts three
members (consumer processes, this script with `--member`), waits until the group is Stable with
every partition owned once, then measures:

1. join: a fourth member process starts; time from its first JoinGroup (the member reports it) to
   the group Stable again with four members owning every partition exactly once. The existing
   members learn of the rebalance from their next heartbeat (`heartbeat.interval.ms`).
2. kill: one member gets SIGKILL; time until the group is Stable with three members owning every
   partition exactly once. The coordinator notices only when `session.timeout.ms` passes, so
   the figure is shown beside the session timeout (the target is session timeout + 2 s).

Each change is made right after the group became Stable, when the members' heartbeat and session
timers have just restarted: the slow case for both figures. Stability is polled through the admin
client (DescribeGroups every 20 ms) and the members'
reported assignments. There is no peer: Redis Streams' consumer groups do not rebalance.

    python bench/rebalance.py [--rounds 3] [--session-timeout-ms 6000] [--heartbeat-interval-ms 1000]
        [--assignor range]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import wait_until  # noqa: E402

PARTITIONS = 6
TOPIC = "rebalanced"
CLIENT_CONFIG = {"request_timeout_ms": 5000, "retry_backoff_ms": 50, "default_api_timeout_ms": 30000}


# --------------------------------------------------------------------------------------------- member

def run_member(args: argparse.Namespace) -> int:
    from services.clients.consumer import Consumer
    from services.clients.consumer.listener import ConsumerRebalanceListener

    def emit(**event) -> None:
        sys.stdout.write(json.dumps({"t": time.time(), **event}) + "\n")
        sys.stdout.flush()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = Consumer(bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
                        session_timeout_ms=args.session_timeout_ms,
                        heartbeat_interval_ms=args.heartbeat_interval_ms,
                        partition_assignment_strategy=args.assignor, **CLIENT_CONFIG)

    class Reporter(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions) -> None:
            emit(event="revoked")

        def on_partitions_assigned(self, partitions) -> None:
            emit(event="assigned", partitions=sorted(tp.partition for tp in consumer.assignment()))

    emit(event="joining")
    consumer.subscribe([TOPIC], listener=Reporter())
    try:
        while not stop.is_set():
            consumer.poll(timeout_ms=100)
    finally:
        consumer.close()
    return 0


class Member:
    def __init__(self, args: argparse.Namespace, bootstrap: str, group: str) -> None:
        command = [sys.executable, os.path.abspath(__file__), "--member", "--bootstrap", bootstrap,
                   "--group", group, "--session-timeout-ms", str(args.session_timeout_ms),
                   "--heartbeat-interval-ms", str(args.heartbeat_interval_ms), "--assignor", args.assignor]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.partitions: set[int] = set()
        self.joining_at: float | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            event = json.loads(line)
            if event["event"] == "joining":
                self.joining_at = event["t"]
            elif event["event"] == "assigned":
                self.partitions = set(event["partitions"])
            elif event["event"] == "revoked":
                self.partitions = set()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)
        self.partitions = set()


def stable_with(admin: Admin, group: str, members: list[Member]) -> bool:
    owned = sorted(p for m in members for p in m.partitions)
    if owned != list(range(PARTITIONS)):
        return False
    description = admin.describe_consumer_groups([group])[group]
    return description.state == "Stable" and len(description.members) == len(members)


def one_round(args: argparse.Namespace, cluster: LocalCluster, admin: Admin, index: int) -> tuple[float, float]:
    group = f"bench-{index}"
    members = [Member(args, cluster.bootstrap_servers, group) for _ in range(3)]
    try:
        wait_until(lambda: stable_with(admin, group, members), 60, 0.02, message="three members stable")
        joiner = Member(args, cluster.bootstrap_servers, group)
        members.append(joiner)
        wait_until(lambda: joiner.joining_at is not None, 30, 0.005, message="the fourth member to start")
        wait_until(lambda: stable_with(admin, group, members), 60, 0.02, message="four members stable")
        join_s = time.time() - joiner.joining_at
        victim = members.pop(0)
        killed_at = time.time()
        victim.kill()
        wait_until(lambda: stable_with(admin, group, members), 60, 0.02, message="three members stable again")
        kill_s = time.time() - killed_at
        return join_s, kill_s
    finally:
        for member in members:
            member.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--member", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        sys.exit(run_member(args))
    with tempfile.TemporaryDirectory(prefix="odradek-rebalance-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, controllers=1, coordinators=2, free_ports=True,
                               coordinator_config={"group.initial.rebalance.delay.ms": 3000})
        cluster.start()
        try:
            with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
                admin.wait_for_topic(TOPIC, 30, partitions=PARTITIONS)
                joins, kills = [], []
                for index in range(args.rounds):
                    join_s, kill_s = one_round(args, cluster, admin, index)
                    joins.append(join_s)
                    kills.append(kill_s)
                    print(f"round {index + 1}: join → Stable {join_s * 1000:.0f} ms, "
                          f"kill -9 → Stable {kill_s * 1000:.0f} ms", flush=True)
        finally:
            cluster.stop()
    session_s = args.session_timeout_ms / 1000
    print(f"\n3-member group, {PARTITIONS} partitions, {args.assignor} assignor, session.timeout.ms "
          f"{args.session_timeout_ms}, heartbeat.interval.ms {args.heartbeat_interval_ms}")
    print(f"member joins  → Stable: median {statistics.median(joins) * 1000:.0f} ms, "
          f"max {max(joins) * 1000:.0f} ms")
    print(f"member killed → Stable: median {statistics.median(kills):.2f} s, max {max(kills):.2f} s "
          f"({max(kills) / session_s:.2f}x the session timeout; target <= {session_s + 2:.0f} s)")


if __name__ == "__main__":
    main()
