"""A Jepsen-style check of read_committed under faults, on a real cluster (one controller, three
brokers, two coordinators).

Four `txn_history_writer` processes write transactions to a four-partition topic with replication
factor 3 (each transaction: a few records on each of a few partitions, committed or aborted at
random) and keep a history of what they committed, aborted and are unsure of. A read_committed
consumer reads every partition all the while. Meanwhile the leader of a partition and the
coordinator of one transactional id are each killed with SIGKILL and started again. At the end
each partition gets a plain record (its end: it shows once every transaction before it is
resolved), and the consumer's observations are checked against the histories by `check_history`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.clients.consumer import Consumer
from services.clients.producer import Producer
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster

REPO = Path(__file__).resolve().parents[2]
TOPIC = "txn-history"
PARTITIONS = 4
WRITERS = 4
END_MARK = b"end-of-history:"  # + the partition


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "txn-history", brokers=3,
                        controllers=1, coordinators=2) as local:
        yield local


# --------------------------------------------------------------------------------------------- check

@dataclass
class TxnHistory:
    """One transaction of one writer: its records ((partition, index), in index order) and outcome
    ("committed", "aborted" or "unsure"; a transaction with no outcome line is unsure)."""

    records: list[tuple[int, int]]
    outcome: str = "unsure"


@dataclass
class CheckResult:
    outcomes: Counter = field(default_factory=Counter)
    unsure_seen: int = 0
    records_checked: int = 0
    violations: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"transactions committed {self.outcomes['committed']}, aborted {self.outcomes['aborted']}, "
                f"unsure {self.outcomes['unsure']} ({self.unsure_seen} of them seen committed); "
                f"records checked {self.records_checked}; violations {len(self.violations)}")


def read_history(path: Path) -> dict[int, TxnHistory]:
    txns: dict[int, TxnHistory] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if "records" in entry:
            txns[entry["txn"]] = TxnHistory([tuple(r) for r in entry["records"]])
        else:
            txns[entry["txn"]].outcome = entry["outcome"]
    return txns


def check_history(observed: dict[int, list[tuple[int, bytes]]],
                  histories: dict[str, dict[int, TxnHistory]]) -> CheckResult:
    """Checks what a read_committed consumer saw ({partition: [(offset, value)]}, in the order it
    saw them) against the writers' histories ({writer: {txn: TxnHistory}})."""
    result = CheckResult()
    seen_values: set[bytes] = set()
    # (writer, txn) -> partition -> indices seen, in offset order
    seen: dict[tuple[str, int], dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for partition, records in observed.items():
        last_offset = -1
        last_of_writer: dict[str, tuple[int, int]] = {}
        for offset, value in records:
            if offset <= last_offset:
                result.violations.append(f"partition {partition}: offset {offset} after {last_offset}")
            last_offset = offset
            if value in seen_values:
                result.violations.append(f"partition {partition}: {value!r} seen twice (offset {offset})")
            seen_values.add(value)
            if value.startswith(END_MARK):
                continue
            result.records_checked += 1
            writer, txn, index, value_partition = value.decode().split(":")
            txn, index = int(txn), int(index)
            history = histories.get(writer, {}).get(txn)
            if history is None or int(value_partition) != partition:
                result.violations.append(f"partition {partition}: {value!r} was never written there")
                continue
            if history.outcome == "aborted":
                result.violations.append(f"partition {partition}: {value!r} of an aborted transaction")
            if last_of_writer.get(writer, (-1, -1)) >= (txn, index):
                result.violations.append(f"partition {partition}: {value!r} at offset {offset} after "
                                         f"{writer}'s {last_of_writer[writer]}")
            last_of_writer[writer] = (txn, index)
            seen[(writer, txn)][partition].append(index)
    for writer, txns in histories.items():
        for txn, history in txns.items():
            result.outcomes[history.outcome] += 1
            _check_transaction(writer, txn, history, seen.get((writer, txn), {}), result)
    return result


def _check_transaction(writer: str, txn: int, history: TxnHistory, seen: dict[int, list[int]],
                       result: CheckResult) -> None:
    """All of a transaction's records on each partition, in order, or (if aborted, or unsure and
    not committed) none anywhere."""
    written: dict[int, list[int]] = defaultdict(list)
    for partition, index in history.records:
        written[partition].append(index)
    if history.outcome == "aborted" or (history.outcome == "unsure" and not seen):
        return
    if history.outcome == "unsure":
        result.unsure_seen += 1
    if seen != written:
        result.violations.append(f"{writer} transaction {txn} ({history.outcome}): wrote {dict(written)}, "
                                 f"seen {dict(seen)}")


# --------------------------------------------------------------------------------------------- processes

class HistoryWriter:
    """A txn_history_writer process."""

    def __init__(self, cluster: LocalCluster, name: str, history: Path, seed: int) -> None:
        self.name = name
        self.history = history
        self.stderr_path = history.with_suffix(".stderr")
        command = [sys.executable, "-m", "tests.integration.txn_history_writer", "--bootstrap",
                   cluster.bootstrap_servers, "--topic", TOPIC, "--partitions", str(PARTITIONS), "--name", name,
                   "--history", str(history), "--seed", str(seed)]
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def committed(self) -> int:
        if not self.history.exists():
            return 0
        return self.history.read_text().count('"outcome": "committed"')

    def stop(self, timeout_s: float = 30) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


class Reader(threading.Thread):
    """A read_committed consumer of every partition, from the beginning until it saw the end mark
    on each (or `stop`), recording (offset, value) per partition."""

    def __init__(self, cluster: LocalCluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.observed: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.ended: set[int] = set()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        try:
            with Consumer(bootstrap_servers=self.cluster.bootstrap_servers, isolation_level="read_committed",
                          fetch_max_wait_ms=100, **CLIENT_CONFIG) as consumer:
                consumer.assign(tps)
                consumer.seek_to_beginning(*tps)
                while not self.stop.is_set() and len(self.ended) < PARTITIONS:
                    for record in consumer.poll(timeout_ms=200):
                        self.observed[record.partition].append((record.offset, record.value))
                        if record.value.startswith(END_MARK):
                            self.ended.add(record.partition)
        except BaseException as error:  # reported by the test
            self.error = error


@pytest.fixture
def writers(tmp_path: Path) -> Iterator[list[HistoryWriter]]:
    started: list[HistoryWriter] = []
    yield started
    for writer in started:
        writer.stop()
        stderr = writer.stderr_path.read_text()
        if "Traceback" in stderr:
            print(f"----- {writer.name} stderr -----\n{stderr[-4000:]}")


def wait_for_commits(writers: list[HistoryWriter], more: int, timeout_s: float, what: str) -> None:
    """Until every writer committed `more` transactions beyond what it had."""
    before = {w.name: w.committed() for w in writers}
    wait_until(lambda: all(w.committed() >= before[w.name] + more for w in writers), timeout_s, 0.1,
               message=f"every writer to commit {more} more transactions {what}")


def kill_then_restart(cluster: LocalCluster, name: str, writers: list[HistoryWriter]) -> None:
    """SIGKILL `name`, wait until the writers commit without it, start it again and wait until
    they commit with it back."""
    cluster.kill_service(name)
    wait_for_commits(writers, 2, 60, f"with {name} killed")
    cluster.start_service(name, timeout_s=30)
    wait_for_commits(writers, 2, 60, f"with {name} back")


# --------------------------------------------------------------------------------------------- test

def test_read_committed_sees_whole_committed_transactions_through_kills(cluster, admin, writers, tmp_path):
    started = time.monotonic()
    create_topic(admin, TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    reader = Reader(cluster)
    reader.start()
    try:
        for index in range(WRITERS):
            writers.append(HistoryWriter(cluster, f"writer-{index}", tmp_path / f"writer-{index}.jsonl", index))
        wait_for_commits(writers, 3, 60, "at the start")
        leader = admin.describe_topics([TOPIC])[TOPIC].partitions[0].leader
        kill_then_restart(cluster, cluster.broker_name(leader), writers)
        coordinator = admin.find_transaction_coordinator(writers[0].name).node_id
        kill_then_restart(cluster, f"coordinator-{coordinator}", writers)
        for writer in writers:
            writer.stop()
        with Producer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as producer:
            for p in range(PARTITIONS):
                producer.send(TOPIC, END_MARK + str(p).encode(), partition=p)
        wait_until(lambda: len(reader.ended) == PARTITIONS or reader.error is not None, 45, 0.1,
                   message=lambda: f"the end mark on every partition (seen on {sorted(reader.ended)})")
    finally:
        reader.stop.set()
        reader.join(30)
    assert reader.error is None, reader.error
    result = check_history(reader.observed, {w.name: read_history(w.history) for w in writers})
    print(f"\nread_committed history check in {time.monotonic() - started:.1f} s: {result.summary()}")
    assert not result.violations, "\n".join(result.violations[:30])
    assert result.outcomes["committed"] >= WRITERS * 11 and result.outcomes["aborted"] > 0


def test_the_check_finds_each_kind_of_violation():
    """The checker itself: a history with every anomaly it is meant to catch."""
    histories = {"w": {0: TxnHistory([(0, 0), (0, 1)], "committed"), 1: TxnHistory([(0, 0)], "aborted"),
                       2: TxnHistory([(0, 0), (1, 1)], "committed"), 3: TxnHistory([(1, 0), (0, 1)]),
                       4: TxnHistory([(1, 0)], "committed")}}
    observed = {0: [(0, b"w:0:1:0"), (1, b"w:0:0:0"), (2, b"w:1:0:0"), (3, b"w:2:0:0"), (3, b"w:3:1:0")],
                1: [(5, b"w:4:0:1"), (6, b"w:4:0:1")]}
    result = check_history(observed, histories)
    joined = "\n".join(result.violations)
    assert "at offset 1 after" in joined  # out of order within a transaction
    assert "of an aborted transaction" in joined
    assert "offset 3 after 3" in joined
    assert "seen twice" in joined
    assert "transaction 2 (committed)" in joined  # missing on partition 1
    assert "transaction 3 (unsure)" in joined  # seen on one partition of two
    assert result.unsure_seen == 1 and result.records_checked == 7
