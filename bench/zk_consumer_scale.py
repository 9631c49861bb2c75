"""Scale run of the 0.8 ZooKeeper consumer beside the group consumer, the same workload in one run.

Starts its own cluster (ZooKeeper, one controller, three brokers, one coordinator; the
`LocalCluster` launcher, free ports, a temp dir) and one topic of `--partitions` partitions with
`--records` records of 100 bytes each. Two groups read it, each with the same number of consumer
threads, all in this process: the ZooKeeper consumer (`--members` connectors of `--streams`
streams, one thread per stream) and its peer, the Kafka 3.x-style `Consumer` with the group
coordinator (members x streams consumers, one thread each, subscribed in one group). First, the
read path alone: one stream of a one-member ZooKeeper group and one Consumer of a one-member
group each iterate the whole topic from the beginning (records/s, first record to last). Then,
for each group:

1. formation: members start one after another; the time until every partition is owned by
   exactly one thread (ZK: the owner znodes; peer: the rebalance listeners' assignments) and
   every record is read, and the read rate from the first record delivered to the last;
2. takeover: one member leaves (a connector shuts down; a consumer closes) while as many records
   again are produced; the time from its leaving until the survivors own everything and have
   read every record, and how many records were delivered twice.

The peer goes first; its consumers then pause their partitions (heartbeats only) while the
ZooKeeper group runs, and catch up, untimed, before their own takeover, so both groups read the
same records and neither reads while the other is measured.

    python bench/zk_consumer_scale.py [--partitions 60] [--members 5] [--streams 4] [--records 2000]
        [--initial-rebalance-delay-ms 3000]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.consumer import Consumer  # noqa: E402
from services.clients.consumer.errors import WakeupError  # noqa: E402
from services.clients.consumer.listener import ConsumerRebalanceListener  # noqa: E402
from services.clients.lowlevel import LowLevelClient  # noqa: E402
from services.clients.zk_consumer import ConsumerTimeoutError, ZookeeperConsumerConnector  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.topic_partition import TopicPartition  # noqa: E402
from services.common.zk import consumers as zk_paths  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import wait_until  # noqa: E402

TOPIC = "zk-scale"
CLIENT = {"request_timeout_ms": 10000, "retry_backoff_ms": 50, "default_api_timeout_ms": 60000}
CONNECTOR = {"auto.offset.reset": "smallest", "rebalance.backoff.ms": 200, "rebalance.max.retries": 50,
             "auto.commit.interval.ms": 500, "consumer.timeout.ms": 200, "refresh.leader.backoff.ms": 100}
PEER = {"auto_offset_reset": "earliest", "auto_commit_interval_ms": 500, **CLIENT}
WAIT_S = 180
BATCH_RECORDS = 5000  # about 0.55 MB a batch


class Reader:
    """Every (partition, offset) a group delivered, how often, when the first and last came, and
    when the count of distinct records reached `expect(count)`."""

    def __init__(self):
        self.seen: Counter = Counter()
        self.lock = threading.Lock()
        self.first_at: float | None = None
        self.last_at = 0.0
        self.target = 0
        self.reached_at: float | None = None

    def expect(self, count: int) -> None:
        with self.lock:
            self.target, self.reached_at = count, None

    def record(self, records) -> None:
        if not records:
            return
        now = time.monotonic()
        with self.lock:
            for m in records:
                self.seen[(m.partition, m.offset)] += 1
            self.first_at = self.first_at or now
            self.last_at = now
            if self.reached_at is None and len(self.seen) >= self.target:
                self.reached_at = now

    def wait_for(self, count: int, what: str) -> float:
        """Waits until `count` distinct records were read (set by `expect`); returns when."""
        wait_until(lambda: self.reached_at is not None, WAIT_S, message=f"{what}: {count} records read")
        return self.reached_at

    def twice(self) -> int:
        with self.lock:
            return sum(1 for c in self.seen.values() if c > 1)


class ZkGroup:
    """`members` connectors of `streams` streams; owners read from ZooKeeper, pipelined."""

    name = "ZooKeeper consumer"

    def __init__(self, cluster: LocalCluster, args):
        self.cluster, self.args, self.reader = cluster, args, Reader()
        self.group = "zk-scale-zk"
        self.members: list[ZookeeperConsumerConnector] = []
        self.threads = {f"{self.group}_m{i}-{n}" for i in range(args.members) for n in range(args.streams)}

    def start(self) -> None:
        for i in range(self.args.members):
            connector = ZookeeperConsumerConnector({"zookeeper.connect": self.cluster.zookeeper_connect,
                                                    "group.id": self.group, "consumer.id": f"m{i}", **CONNECTOR})
            for stream in connector.create_message_streams({TOPIC: self.args.streams})[TOPIC]:
                threading.Thread(target=self._consume, args=(stream,), daemon=True).start()
            self.members.append(connector)

    def _consume(self, stream) -> None:
        while True:
            try:
                for m in stream:
                    self.reader.record((m,))
                return
            except ConsumerTimeoutError:
                continue

    def owners(self) -> list[str | None]:
        kazoo = self.members[0].zk.zk
        pending = [kazoo.get_async(zk_paths.owner_path(self.group, TopicPartition(TOPIC, p)))
                   for p in range(self.args.partitions)]
        found = []
        for result in pending:
            try:
                found.append(zk_paths.decode_owner(result.get()[0]))
            except Exception:  # noqa: BLE001 - no owner znode (NoNodeError) means unowned
                found.append(None)
        return found

    def rebalances(self) -> str:
        return f"rebalances per member {[m.rebalance_count for m in self.members]}"

    def leave(self) -> str:
        leaving = self.members.pop()
        leaving.shutdown()
        self.threads = {t for t in self.threads if not t.startswith(leaving.consumer_id + "-")}
        return leaving.consumer_id

    def close(self) -> None:
        while self.members:
            self.members.pop().shutdown()


class PeerMember(ConsumerRebalanceListener):
    """One `Consumer` on a thread of its own; reports its assignment through the listener."""

    def __init__(self, group: PeerGroup, name: str):
        self.group, self.name = group, name
        self.owned: set[int] = set()
        self.assignments = 0
        self.leaving = threading.Event()
        self.closed = threading.Event()
        self.consumer = Consumer(bootstrap_servers=group.cluster.bootstrap_servers, group_id=group.group,
                                 client_id=name, **PEER)
        threading.Thread(target=self._run, daemon=True).start()

    def on_partitions_revoked(self, partitions) -> None:
        self.owned = self.owned - {tp.partition for tp in partitions}  # a new set: read by another thread

    def on_partitions_assigned(self, partitions) -> None:
        self.owned = self.owned | {tp.partition for tp in partitions}
        self.assignments += 1

    def _run(self) -> None:
        consumer = self.consumer
        consumer.subscribe([TOPIC], listener=self)
        try:
            while not self.leaving.is_set():
                if self.group.held.is_set():
                    consumer.pause(*consumer.assignment())
                elif consumer.paused():
                    consumer.resume(*consumer.paused())
                self.group.reader.record(list(consumer.poll(timeout_ms=100)))
        except WakeupError:
            pass
        finally:
            consumer.close()
            self.closed.set()

    def leave(self) -> None:
        self.leaving.set()
        self.consumer.wakeup()
        self.closed.wait(60)


class PeerGroup:
    """members x streams `Consumer`s in one group; owners from their listeners."""

    name = "group Consumer (peer)"

    def __init__(self, cluster: LocalCluster, args):
        self.cluster, self.args, self.reader = cluster, args, Reader()
        self.group = "zk-scale-peer"
        self.held = threading.Event()
        self.members: list[PeerMember] = []
        self.threads = {f"c{i}" for i in range(args.members * args.streams)}

    def start(self) -> None:
        for i in range(self.args.members * self.args.streams):
            self.members.append(PeerMember(self, f"c{i}"))

    def owners(self) -> list[str | None]:
        found: list[str | None] = [None] * self.args.partitions
        for member in self.members:
            for p in member.owned:
                found[p] = "twice" if found[p] is not None else member.name
        return found

    def rebalances(self) -> str:
        counts = Counter(m.assignments for m in self.members)
        return (f"assignments per consumer {dict(sorted(counts.items()))} (count: consumers), "
                f"group.initial.rebalance.delay.ms {self.args.initial_rebalance_delay_ms}")

    def leave(self) -> str:
        leaving = self.members.pop()
        leaving.leave()
        self.threads.discard(leaving.name)
        return leaving.name

    def close(self) -> None:
        while self.members:
            self.members.pop().leave()


def produce(client: LowLevelClient, partitions: int, records: int) -> None:
    """`records` records of 100 B to every partition, in batches below message.max.bytes."""
    for start in range(0, records, BATCH_RECORDS):
        batch = build_batch([b"x" * 100] * min(BATCH_RECORDS, records - start))
        for tp, result in client.produce_many({(TOPIC, p): batch for p in range(partitions)}, acks=-1).items():
            assert result.error_code == 0, (tp, result)


def owned_once(group, partitions: int) -> bool:
    found = group.owners()
    return None not in found and set(found) <= group.threads \
        and len(set(found)) == min(len(group.threads), partitions)


def form(group, total: int, args) -> dict:
    """Starts the group's members one after another; times ownership and reading every record."""
    group.reader.expect(total)
    start = time.monotonic()
    group.start()
    started_s = time.monotonic() - start
    wait_until(lambda: owned_once(group, args.partitions), WAIT_S, message=f"{group.name}: owned once")
    owned_s = time.monotonic() - start
    read_s = group.reader.wait_for(total, group.name) - start
    reader = group.reader
    rate = total / max(reader.last_at - reader.first_at, 1e-6)
    print(f"{group.name}: members started in {started_s:.2f} s; every partition owned once after "
          f"{owned_s:.2f} s ({group.rebalances()}); {total} records read after {read_s:.2f} s "
          f"({rate:,.0f} records/s from first to last)", flush=True)
    return {"owned_s": owned_s, "read_s": read_s, "rate": rate}


def take_over(group, writer: LowLevelClient, total: int, args) -> dict:
    """Produces `--records` more per partition while one member leaves; times the takeover."""
    twice_before = group.reader.twice()
    group.reader.expect(total)
    producing = threading.Thread(target=produce, args=(writer, args.partitions, args.records))
    start = time.monotonic()
    producing.start()
    leaver = group.leave()
    left_s = time.monotonic() - start
    producing.join()
    wait_until(lambda: None not in (found := group.owners()) and set(found) <= group.threads, WAIT_S,
               message=f"{group.name}: survivors own everything")
    owned_s = time.monotonic() - start
    read_s = group.reader.wait_for(total, group.name) - start
    twice = group.reader.twice() - twice_before
    print(f"{group.name}: {leaver} left in {left_s:.2f} s; survivors own everything after {owned_s:.2f} s; "
          f"every record read after {read_s:.2f} s; delivered twice: {twice}", flush=True)
    return {"t_owned_s": owned_s, "t_read_s": read_s, "t_twice": twice}


def read_alone(cluster: LocalCluster, total: int) -> tuple[float, float]:
    """Records/s of one ZooKeeper consumer stream, then of one Consumer, each the only member of its
    group, iterating every record of the topic from the beginning (the read path without rebalances),
    timed from the first record handed out to the last."""
    connector = ZookeeperConsumerConnector({"zookeeper.connect": cluster.zookeeper_connect,
                                            "group.id": "zk-scale-alone", **CONNECTOR, "consumer.timeout.ms": 10000})
    try:
        started, read = None, 0
        for _message in connector.create_message_streams({TOPIC: 1})[TOPIC][0]:
            started = started or time.perf_counter()
            read += 1
            if read == total:
                break
        zk_rate = total / (time.perf_counter() - started)
    finally:
        connector.shutdown()
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="peer-alone", **PEER) as consumer:
        consumer.subscribe([TOPIC])
        started, read = None, 0
        while read < total:
            for _record in consumer.poll(1.0):
                started = started or time.perf_counter()
                read += 1
        peer_rate = total / (time.perf_counter() - started)
    return zk_rate, peer_rate


def ratio(zk: float, peer: float) -> str:
    return f"{zk / peer:.2f}x" if peer else "-"


def summary(zk: dict, peer: dict, args) -> None:
    threads = args.members * args.streams
    print(f"\n{args.partitions} partitions x {args.records} records of 100 B; {threads} consumer threads in the groups "
          f"(ZK: {args.members} members x {args.streams} streams; peer: {threads} Consumers)")
    rows = [("one stream / one Consumer alone (records/s)", "alone_rate", "{:,.0f}"),
            ("group read rate, first to last record (records/s)", "rate", "{:,.0f}"),
            ("formation: every partition owned once (s)", "owned_s", "{:.2f}"),
            ("formation: every record read (s)", "read_s", "{:.2f}"),
            ("takeover: survivors own everything (s)", "t_owned_s", "{:.2f}"),
            ("takeover: every new record read (s)", "t_read_s", "{:.2f}"),
            ("takeover: records delivered twice", "t_twice", "{:,}")]
    print(f"| {'figure':<50} | {'ZK consumer':>12} | {'peer':>12} | {'ZK / peer':>9} |")
    print(f"|{'-' * 52}|{'-' * 13}:|{'-' * 13}:|{'-' * 10}:|")
    for label, key, fmt in rows:
        print(f"| {label:<50} | {fmt.format(zk[key]):>12} | {fmt.format(peer[key]):>12} | "
              f"{ratio(zk[key], peer[key]):>9} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--records", type=int, default=2000, help="records per partition")
    parser.add_argument("--initial-rebalance-delay-ms", type=int, default=3000,
                        help="the coordinator's group.initial.rebalance.delay.ms")
    args = parser.parse_args()
    print("$ python " + shlex.join(sys.argv), flush=True)
    coordinator = {"group.initial.rebalance.delay.ms": args.initial_rebalance_delay_ms}
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(tmp, brokers=3, controllers=1, coordinators=1,
                                                            free_ports=True,
                                                            coordinator_config=coordinator) as cluster:
        with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT) as admin, \
                LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT) as writer:
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])
            admin.wait_for_topic(TOPIC, 60, partitions=args.partitions)
            produce(writer, args.partitions, args.records)
            peer, zk = PeerGroup(cluster, args), ZkGroup(cluster, args)
            per_round = args.partitions * args.records  # records in each round of produce
            try:
                zk_alone, peer_alone = read_alone(cluster, per_round)
                peer_figures = form(peer, per_round, args)
                peer.held.set()  # the peer's consumers pause while the ZooKeeper group is measured
                zk_figures = form(zk, per_round, args)
                zk_figures.update(take_over(zk, writer, 2 * per_round, args))
                zk.close()
                peer.reader.expect(2 * per_round)
                peer.held.clear()
                peer.reader.wait_for(2 * per_round, "the peer catching up")
                peer_figures.update(take_over(peer, writer, 3 * per_round, args))
            finally:
                zk.close()
                peer.close()
    zk_figures["alone_rate"], peer_figures["alone_rate"] = zk_alone, peer_alone
    summary(zk_figures, peer_figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
