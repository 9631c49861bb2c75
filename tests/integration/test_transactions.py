"""Transactions end to end on a real cluster (one controller, three brokers, two coordinators,
shared by the tests of this module): aborted records hidden from read_committed consumers and
seen by read_uncommitted ones (transactions written straight to the leaders, and by producers), a
hanging transaction found and aborted by `odradek transactions`, a failed send making its
transaction abortable, a batch reaching its leader after the abort fenced by the bumped epoch of the
abort's markers, a zombie producer fenced by a newer one with its transactional id,
a consume-transform-produce worker killed with SIGKILL again and again that still produces the
transformed input exactly once, and commits that survive SIGKILLs of their coordinator (after and
before EndTxn).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients import cli
from services.clients.consumer import Consumer
from services.clients.producer import Producer, ProducerFencedError
from services.common.errors import Errors, KafkaError
from services.common.records import build_batch
from services.common.shared_types import TxnMarker
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster

REPO = Path(__file__).resolve().parents[2]
REPLICATION = 2


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "txn", brokers=3, controllers=1,
                        coordinators=2) as local:
        yield local


def transactional_producer(cluster: LocalCluster, transactional_id: str) -> Producer:
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id=transactional_id,
                        max_block_ms=30000, **CLIENT_CONFIG)
    producer.init_transactions()
    return producer


def read_to_end(cluster: LocalCluster, topic: str, partitions: int, isolation_level: str,
                timeout_s: float = 60) -> dict[int, list[bytes]]:
    """Every value each partition shows at `isolation_level`, up to its end (the last stable
    offset under read_committed)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level=isolation_level,
                  fetch_max_wait_ms=100, **CLIENT_CONFIG) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic} not read to {ends} within {timeout_s} s"
            for record in consumer.poll(timeout_ms=200):
                values[record.partition].append(record.value)
    return values


def txn_batch(values: list[bytes], producer_id: int, sequence: int = 0, timestamp_ms: int | None = None) -> bytes:
    return build_batch(values, producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                       is_transactional=True, timestamps=timestamp_ms)


def end_transaction(writer, topic: str, producer_id: int, commit: bool) -> None:
    codes = writer.write_txn_marker(TxnMarker(producer_id, 0, commit, 0), [(topic, 0)])
    assert codes == {TopicPartition(topic, 0): Errors.NONE}


def test_read_committed_skips_the_batches_of_aborted_transactions(cluster, admin, writer):
    """Transactions written straight to the leader (batches, then markers) as a coordinator would:
    producer 1 aborts while producer 2, interleaved with it, commits."""
    topic = create_topic(admin, "txn-interleaved", 1, REPLICATION)
    for batch in (txn_batch([b"a1"], 900001), txn_batch([b"b1"], 900002), txn_batch([b"a2"], 900001, 1)):
        assert writer.produce(topic, 0, batch, acks=-1).error_code == Errors.NONE
    end_transaction(writer, topic, 900001, commit=False)
    end_transaction(writer, topic, 900002, commit=True)
    assert writer.produce(topic, 0, build_batch([b"plain"]), acks=-1).error_code == Errors.NONE
    assert read_to_end(cluster, topic, 1, "read_committed") == {0: [b"b1", b"plain"]}
    assert read_to_end(cluster, topic, 1, "read_uncommitted") == {0: [b"a1", b"b1", b"a2", b"plain"]}


def test_a_hanging_transaction_is_described_and_aborted_by_the_tool(cluster, admin, writer, capsys):
    topic = create_topic(admin, "txn-hanging", 1, REPLICATION)
    old_ms = int(time.time() * 1000) - 3_600_000
    assert writer.produce(topic, 0, txn_batch([b"hanging"], 900003, timestamp_ms=old_ms),
                          acks=-1).error_code == Errors.NONE
    assert writer.produce(topic, 0, build_batch([b"after"]), acks=-1).error_code == Errors.NONE
    assert read_to_end(cluster, topic, 1, "read_committed") == {0: []}  # the open transaction holds the LSO
    tp = TopicPartition(topic, 0)
    [state] = [s for s in admin.describe_producers([tp])[tp] if s.producer_id == 900003]
    assert state.current_transaction_start_offset == 0
    leader = admin.describe_topics([topic])[topic].partitions[0].leader
    capsys.readouterr()
    assert cli.main(["transactions", "--bootstrap-server", cluster.bootstrap_servers, "--find-hanging",
                     "--broker-id", str(leader)]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["Topic", "Partition", "ProducerId"]
    assert [row.split()[:3] for row in rows] == [[topic, "0", "900003"]]
    assert cli.main(["transactions", "--bootstrap-server", cluster.bootstrap_servers, "--abort", "--topic", topic,
                     "--partition", "0", "--producer-id", "900003", "--producer-epoch", str(state.producer_epoch),
                     "--coordinator-epoch", str(max(state.coordinator_epoch, 0))]) == 0, capsys.readouterr().out
    assert read_to_end(cluster, topic, 1, "read_committed") == {0: [b"after"]}


def test_aborted_records_are_hidden_from_read_committed_and_committed_ones_shown(cluster, admin, capsys):
    topic = create_topic(admin, "txn-visibility", 2, REPLICATION)
    with transactional_producer(cluster, "visibility") as producer:
        producer.begin_transaction()
        for p in range(2):
            producer.send(topic, f"aborted-{p}".encode(), partition=p)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        for p in range(2):
            producer.send(topic, f"committed-{p}".encode(), partition=p)
        producer.commit_transaction()
    assert read_to_end(cluster, topic, 2, "read_committed") == {p: [f"committed-{p}".encode()] for p in range(2)}
    assert read_to_end(cluster, topic, 2, "read_uncommitted") == {
        p: [f"aborted-{p}".encode(), f"committed-{p}".encode()] for p in range(2)}
    capsys.readouterr()
    assert cli.main(["console-consumer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", topic,
                     "--partition", "1", "--offset", "earliest", "--isolation-level", "read_committed",
                     "--timeout-ms", "3000"]) == 0
    assert capsys.readouterr().out.splitlines() == ["committed-1"]


def test_a_failed_send_aborts_the_transaction_and_the_next_one_commits(cluster, admin):
    topic = create_topic(admin, "txn-abortable", 1, REPLICATION, configs={"max.message.bytes": "2000"})
    with transactional_producer(cluster, "abortable") as producer:
        producer.begin_transaction()
        producer.send(topic, b"aborted-with-it")
        refused = producer.send(topic, b"x" * 5000)
        with pytest.raises(KafkaError):
            producer.commit_transaction()
        assert isinstance(refused.exception(timeout=30), KafkaError)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"next")
        producer.commit_transaction()
    assert read_to_end(cluster, topic, 1, "read_committed") == {0: [b"next"]}


def test_an_abort_after_a_sequence_gap_bumps_the_epoch(cluster, admin):
    """The abort itself (EndTxn with bump_epoch) gives the next epoch of the same producer id, and
    the next transaction's batches start their sequences again at 0."""
    topic = create_topic(admin, "txn-bump", 1, REPLICATION)
    with transactional_producer(cluster, "bump") as producer:
        producer.begin_transaction()
        producer.send(topic, b"aborted").get(timeout=30)
        before = admin.describe_transactions(["bump"])["bump"]
        producer._txn.manager.require_epoch_bump()  # as a batch lost in flight leaves it
        producer.abort_transaction()
        after = admin.describe_transactions(["bump"])["bump"]
        assert (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch + 1)
        producer.begin_transaction()
        producer.send(topic, b"kept")
        producer.commit_transaction()
    assert read_to_end(cluster, topic, 1, "read_committed") == {0: [b"kept"]}


def test_a_batch_reaching_its_leader_after_the_abort_is_fenced_not_committed_later(cluster, admin, writer):
    """A send that timed out on the producer may still reach the leader after the abort's markers.
    Replayed here without timing: once the abort completed, the late batch (the producer's id, its
    old epoch, the next sequence) is written straight to the leader. The ABORT marker carried the
    bumped epoch, so the leader refuses it; otherwise it would open a transaction that the next
    commit would take in."""
    topic = create_topic(admin, "txn-late-batch", 1, REPLICATION)
    with transactional_producer(cluster, "late") as producer:
        producer.begin_transaction()
        producer.send(topic, b"aborted").get(timeout=30)
        manager = producer._txn.manager
        producer_id, epoch = manager.producer_id, manager.producer_epoch
        manager.require_epoch_bump()  # as a send that timed out (maybe written) leaves it
        producer.abort_transaction()
        wait_until(lambda: admin.describe_transactions(["late"])["late"].state in ("CompleteAbort", "Empty"), 30,
                   message="the abort's markers to be written")
        late = build_batch([b"late"], producer_id=producer_id, producer_epoch=epoch, base_sequence=1,
                           is_transactional=True)
        late_code = writer.produce(topic, 0, late, acks=-1, transactional_id="late").error_code
        producer.begin_transaction()
        producer.send(topic, b"kept")
        producer.commit_transaction()
    assert read_to_end(cluster, topic, 1, "read_committed") == {0: [b"kept"]}
    assert late_code == Errors.INVALID_PRODUCER_EPOCH


def test_a_zombie_with_the_same_transactional_id_is_fenced(cluster, admin):
    topic = create_topic(admin, "txn-zombie", 1, REPLICATION)
    zombie = transactional_producer(cluster, "zombie")
    try:
        zombie.begin_transaction()
        zombie.send(topic, b"from-the-zombie").get(timeout=30)
        with transactional_producer(cluster, "zombie") as successor:
            with pytest.raises(ProducerFencedError):
                zombie.commit_transaction()
            with pytest.raises(KafkaError):
                zombie.send(topic, b"more-from-the-zombie")
            with pytest.raises(ProducerFencedError):
                zombie.abort_transaction()
            successor.begin_transaction()
            successor.send(topic, b"from-the-successor")
            successor.commit_transaction()
    finally:
        zombie.close(5)
    assert read_to_end(cluster, topic, 1, "read_committed") == {0: [b"from-the-successor"]}


# --------------------------------------------------------------------------------------------- worker

class Worker:
    """A txn_worker process, counting the transactions it reports committed."""

    def __init__(self, cluster: LocalCluster, group: str, source: str, target: str) -> None:
        command = [sys.executable, "-m", "tests.integration.txn_worker", "--bootstrap", cluster.bootstrap_servers,
                   "--group", group, "--input", source, "--output", target, "--transactional-id", f"{group}-worker"]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.committed = 0
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if json.loads(line)["event"] == "committed":
                self.committed += 1

    def stop(self, kill: bool) -> None:
        if self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            self.process.wait(20)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        try:
            worker.stop(kill=False)
        except subprocess.TimeoutExpired:
            worker.stop(kill=True)
        if any("Traceback" in line for line in worker.stderr):
            print(f"----- worker stderr -----\n{''.join(worker.stderr[-40:])}")


def test_consume_transform_produce_survives_kills_exactly_once(cluster, admin, writer, workers):
    source = create_topic(admin, "ctp-in", 2, REPLICATION)
    target = create_topic(admin, "ctp-out", 2, REPLICATION)
    expected = {p: [f"{p}-{i}".encode() for i in range(400)] for p in range(2)}
    for p, values in expected.items():
        for start in range(0, len(values), 50):
            writer.produce(source, p, build_batch(values[start:start + 50]), acks=-1)
    rng = random.Random(7)
    for _ in range(3):
        worker = Worker(cluster, "ctp", source, target)
        workers.append(worker)
        before = worker.committed
        wait_until(lambda w=worker, b=before: w.committed > b + 2, 60, 0.05,
                   message="the worker to commit transactions")
        time.sleep(rng.uniform(0, 0.5))  # a random point inside the next transactions
        worker.stop(kill=True)
    workers.append(Worker(cluster, "ctp", source, target))
    wanted = {p: [b"out-" + v for v in values] for p, values in expected.items()}
    wait_until(lambda: read_to_end(cluster, target, 2, "read_committed") == wanted, 120, 1,
               message="the output to hold the transformed input exactly once")


# --------------------------------------------------------------------------------------------- coordinator

def test_a_commit_survives_kills_of_the_transaction_coordinator(cluster, admin):
    """First the coordinator is killed right after EndTxn answered (PrepareCommit is logged, the
    markers may not be written: the next owner writes them); then it is killed before EndTxn
    (the producer finds the next owner, which loaded the ongoing transaction, and commits there)."""
    topic = create_topic(admin, "txn-failover", 3, REPLICATION)
    wanted: dict[int, list[bytes]] = {p: [] for p in range(3)}
    with transactional_producer(cluster, "failover") as producer:
        for round_, kill_before_commit in enumerate((False, True)):
            name = f"coordinator-{admin.find_transaction_coordinator('failover').node_id}"
            producer.begin_transaction()
            for p in range(3):
                producer.send(topic, f"kept-{round_}-{p}".encode(), partition=p)
                wanted[p].append(f"kept-{round_}-{p}".encode())
            producer.flush()
            try:
                if kill_before_commit:
                    cluster.kill_service(name)
                producer.commit_transaction()
                if not kill_before_commit:
                    cluster.kill_service(name)
                wait_until(lambda: read_to_end(cluster, topic, 3, "read_committed") == wanted, 90, 1,
                           message="the commit to reach every partition despite the coordinator's kill")
            finally:
                cluster.start_service(name)


def test_transactions_tool_lists_and_describes(cluster, admin, capsys):
    with transactional_producer(cluster, "listed"):
        pass
    wait_until(lambda: any(t.transactional_id == "listed" for t in admin.list_transactions()), 30, 0.2)
    coordinator = admin.find_transaction_coordinator("listed").node_id
    capsys.readouterr()
    assert cli.main(["transactions", "--bootstrap-server", cluster.bootstrap_servers, "--list"]) == 0
    header, *rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert ["listed", str(coordinator)] in [row[:2] for row in rows]
    assert cli.main(["transactions", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                     "--transactional-id", "listed"]) == 0
    out = capsys.readouterr().out
    assert "listed" in out and "Empty" in out
