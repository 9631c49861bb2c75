"""The transaction coordinator against a real cluster (one controller, three brokers, two
coordinators, shared by the module), driven with raw CoordinatorService requests: epoch bumps
fencing the older producer, a commit completing through its markers (its data readable with
read_committed only then), a deleted topic not holding a commit, a coordinator killed while a
commit is prepared (the next owner completes it), a transaction aborted on its timeout, and an
abort that bumps the epoch (its markers fence a late batch of the old epoch; its retry is
recognised by the next owner).

Markers to a partition whose leader broker is stopped wait for it; that is how a commit is held
in PrepareCommit. A coordinator without WriteTxnMarkers (for the `__consumer_offsets` partition
of AddOffsetsToTxn) answers UNIMPLEMENTED, which the transaction coordinator counts as written
(Kafka's answer for a partition that cannot take markers).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.clients.transport import COORDINATOR, ChannelPool
from services.common.errors import Errors, KafkaError
from services.common.hashing import coordinator_partition
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.records.builder import build_batch
from services.common.records.reader import iter_batches
from services.common.shared_types import IsolationLevel
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinators import decode_ownership
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import TEST_COORDINATOR_CONFIG, create_topic, module_cluster

RETRY = {Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE,
         Errors.CONCURRENT_TRANSACTIONS, Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION}
TXN_STATE = "__transaction_state"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    config = {**TEST_COORDINATOR_CONFIG, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300}
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "txn", brokers=3, controllers=1,
                        coordinators=2, coordinator_config=config) as local:
        yield local


@pytest.fixture(scope="module")
def pool() -> Iterator[ChannelPool]:
    with ChannelPool(request_timeout_ms=10000) as channels:
        yield channels


class Txn:
    """Raw requests for one transactional id, sent to whichever coordinator owns it, retried on
    the answers that say to retry (not owned yet, loading, a previous transaction completing)."""

    def __init__(self, cluster: LocalCluster, pool: ChannelPool, transactional_id: str) -> None:
        self.cluster, self.pool, self.transactional_id = cluster, pool, transactional_id
        self.producer_id, self.epoch = -1, -1

    def coordinator(self) -> str:
        def found():
            for name in self.cluster.coordinator_names:
                if not self.cluster.is_serving(name):
                    continue
                try:
                    answer = self.pool.call(self.cluster.endpoint(name), COORDINATOR, "FindCoordinator",
                                            common_pb2.FindCoordinatorRequest(key=self.transactional_id,
                                                                              key_type=common_pb2.TRANSACTION))
                except KafkaError:
                    continue
                if answer.error_code == Errors.NONE:
                    return f"{answer.coordinator.host}:{answer.coordinator.port}"
            return None
        return wait_until(found, 30, 0.1, message="a coordinator for the transactional id")

    def call(self, method: str, request, code_of=lambda r: r.error_code, timeout_s: float = 30):
        def attempt():
            try:
                response = self.pool.call(self.coordinator(), COORDINATOR, method, request)
            except KafkaError as e:
                if e.code in RETRY:
                    return None
                raise
            return None if code_of(response) in RETRY else response
        return wait_until(attempt, timeout_s, 0.1, message=f"{method} to be answered")

    def init(self, timeout_ms: int = 60000):
        response = self.call("InitProducerId", common_pb2.InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=timeout_ms, producer_id=-1,
            producer_epoch=-1))
        assert response.error_code == Errors.NONE, response
        self.producer_id, self.epoch = response.producer_id, response.producer_epoch
        return response

    def add(self, *partitions: TopicPartition, epoch: int | None = None) -> int:
        request = pb.AddPartitionsToTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                               producer_epoch=self.epoch if epoch is None else epoch)
        for tp in partitions:
            request.topics.add(name=tp.topic, partitions=[tp.partition])
        return self.call("AddPartitionsToTxn", request).error_code

    def end(self, commit: bool) -> int:
        return self.end_answer(commit).error_code

    def end_answer(self, commit: bool, bump_epoch: bool = False, epoch: int | None = None) -> pb.EndTxnResponse:
        return self.call("EndTxn", pb.EndTxnRequest(transactional_id=self.transactional_id,
                                                    producer_id=self.producer_id,
                                                    producer_epoch=self.epoch if epoch is None else epoch,
                                                    committed=commit, bump_epoch=bump_epoch))

    def describe(self):
        response = self.call("DescribeTransactions",
                             pb.DescribeTransactionsRequest(transactional_ids=[self.transactional_id]),
                             code_of=lambda r: r.transaction_states[0].error_code)
        return response.transaction_states[0]

    def wait_state(self, state: str, timeout_s: float = 20):
        return wait_until(lambda: (d := self.describe()).transaction_state == state and d, timeout_s, 0.1,
                          message=lambda: f"{self.transactional_id} to be {state}, not "
                                          f"{self.describe().transaction_state}")


def test_a_second_init_bumps_the_epoch_and_fences_the_first(cluster, pool, admin):
    topic = create_topic(admin, "fenced", partitions=1, replication=2)
    txn = Txn(cluster, pool, "fence-me")
    first = txn.init()
    second = txn.init()
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    assert txn.add(TopicPartition(topic, 0), epoch=first.producer_epoch) == Errors.PRODUCER_FENCED
    assert txn.add(TopicPartition(topic, 0), TopicPartition("no-such-topic", 0)) == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert txn.describe().transaction_state == "Empty"
    assert txn.add(TopicPartition(topic, 0)) == Errors.NONE
    assert txn.describe().transaction_state == "Ongoing"


def test_a_commit_completes_through_its_markers(cluster, pool, admin, writer):
    topic = create_topic(admin, "committed", partitions=2, replication=2)
    txn = Txn(cluster, pool, "commit-me")
    txn.init()
    assert txn.add(TopicPartition(topic, 0), TopicPartition(topic, 1)) == Errors.NONE
    batch = build_batch([b"a", b"b"], producer_id=txn.producer_id, producer_epoch=txn.epoch, base_sequence=0,
                        is_transactional=True)
    assert writer.produce(topic, 0, batch, acks=-1).error_code == Errors.NONE
    assert writer.fetch_records(topic, 0, 0, isolation_level=IsolationLevel.READ_COMMITTED)[0] == []
    offsets = txn.call("AddOffsetsToTxn", pb.AddOffsetsToTxnRequest(
        transactional_id=txn.transactional_id, producer_id=txn.producer_id, producer_epoch=txn.epoch,
        group_id="committers"))
    assert offsets.error_code == Errors.NONE
    described = txn.describe()
    assert {(t.topic, tuple(t.partitions)) for t in described.topics} == {
        (topic, (0, 1)), ("__consumer_offsets", (coordinator_partition("committers"),))}
    assert txn.end(commit=True) == Errors.NONE
    done = txn.wait_state("CompleteCommit")
    assert list(done.topics) == []
    records, fetched = writer.fetch_records(topic, 0, 0, isolation_level=IsolationLevel.READ_COMMITTED)
    assert [r.value for r in records] == [b"a", b"b"] and fetched.last_stable_offset == 3
    markers = [h for h, _ in iter_batches(writer.fetch(topic, 1, 0).records) if h.is_control]
    assert [(h.producer_id, h.producer_epoch) for h in markers] == [(txn.producer_id, txn.epoch)]
    assert txn.end(commit=True) == Errors.NONE   # a retry after it completed
    assert txn.end(commit=False) == Errors.INVALID_TXN_STATE
    listed = txn.call("ListTransactions", pb.ListTransactionsRequest(state_filters=["CompleteCommit"]))
    assert txn.transactional_id in {s.transactional_id for s in listed.transaction_states}


def test_a_deleted_topic_does_not_hold_a_commit(cluster, pool, admin):
    kept, doomed = create_topic(admin, "kept", replication=2), create_topic(admin, "doomed-txn", replication=2)
    txn = Txn(cluster, pool, "outlive-a-topic")
    txn.init()
    assert txn.add(TopicPartition(kept, 0), TopicPartition(doomed, 0)) == Errors.NONE
    admin.delete_topics([doomed])
    wait_until(lambda: doomed not in admin.list_topics(), 30, 0.2, message="the topic to vanish")
    assert txn.end(commit=True) == Errors.NONE
    txn.wait_state("CompleteCommit")


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(cluster, pool, admin):
    topic = create_topic(admin, "abandoned", partitions=1, replication=2)
    txn = Txn(cluster, pool, "time-me-out")
    txn.init(timeout_ms=1000)
    assert txn.add(TopicPartition(topic, 0)) == Errors.NONE
    aborted = txn.wait_state("CompleteAbort")
    assert aborted.producer_epoch == txn.epoch + 1
    assert txn.add(TopicPartition(topic, 0)) == Errors.PRODUCER_FENCED
    assert txn.end(commit=True) == Errors.PRODUCER_FENCED


def test_an_abort_with_bump_marks_the_next_epoch_and_its_retry_survives_a_failover(cluster, pool, admin, writer,
                                                                                  _zk_root_client):
    topic = create_topic(admin, "bumped-abort", partitions=1, replication=2)
    txn = Txn(cluster, pool, "bump-on-abort")
    txn.init()
    old_epoch = txn.epoch
    assert txn.add(TopicPartition(topic, 0)) == Errors.NONE
    batch = build_batch([b"aborted"], producer_id=txn.producer_id, producer_epoch=old_epoch, base_sequence=0,
                        is_transactional=True)
    assert writer.produce(topic, 0, batch, acks=-1).error_code == Errors.NONE
    answer = txn.end_answer(commit=False, bump_epoch=True)
    assert (answer.error_code, answer.producer_epoch) == (Errors.NONE, old_epoch + 1)
    assert txn.wait_state("CompleteAbort").producer_epoch == old_epoch + 1
    markers = [h for h, _ in iter_batches(writer.fetch(topic, 0, 0).records) if h.is_control]
    assert [(h.producer_id, h.producer_epoch) for h in markers] == [(txn.producer_id, old_epoch + 1)]
    late = build_batch([b"late"], producer_id=txn.producer_id, producer_epoch=old_epoch, base_sequence=1,
                       is_transactional=True)
    assert writer.produce(topic, 0, late, acks=-1).error_code == Errors.INVALID_PRODUCER_EPOCH
    owned = TopicPartition(TXN_STATE, coordinator_partition(txn.transactional_id))

    def owner():
        data, _ = _zk_root_client.get(f"{cluster.chroot}/coordinators/ownership")
        return decode_ownership(data).partitions[owned]

    before = owner()
    victim = f"coordinator-{before.owner_id}"
    cluster.kill_service(victim)
    try:
        wait_until(lambda: owner().owner_id != before.owner_id, 30, 0.1, message="the partition to move")
        retried = txn.end_answer(commit=False, bump_epoch=True, epoch=old_epoch)  # loaded from the log
        assert (retried.error_code, retried.producer_epoch) == (Errors.NONE, old_epoch + 1)
        assert txn.end_answer(commit=False, epoch=old_epoch).error_code == Errors.PRODUCER_FENCED
    finally:
        cluster.start_service(victim)


def test_a_prepared_commit_survives_its_coordinator(cluster, pool, admin, _zk_root_client):
    txn = Txn(cluster, pool, "outlive-me")
    txn.init()
    owned = TopicPartition(TXN_STATE, coordinator_partition(txn.transactional_id))
    # the held topic's only replica is a broker whose stop leaves the transaction's state writable
    state = admin.describe_topics([TXN_STATE])[TXN_STATE].partitions[owned.partition]
    brokers = sorted(set(range(1, 4)) - set(state.replicas)) or [b for b in state.replicas if b != state.leader]
    topic = create_topic(admin, "held", assignment={0: [brokers[0]]})
    assert txn.add(TopicPartition(topic, 0)) == Errors.NONE
    broker = cluster.broker_name(brokers[0])
    cluster.stop_service(broker)          # the marker waits for the partition's only replica
    try:
        assert txn.end(commit=True) == Errors.NONE
        assert txn.describe().transaction_state == "PrepareCommit"

        def owner():
            data, _ = _zk_root_client.get(f"{cluster.chroot}/coordinators/ownership")
            return decode_ownership(data).partitions[owned]

        before = owner()
        victim = f"coordinator-{before.owner_id}"
        cluster.kill_service(victim)
        wait_until(lambda: owner().owner_id != before.owner_id, 30, 0.1, message="the partition to move")
        assert owner().epoch == before.epoch + 1
        assert txn.describe().transaction_state == "PrepareCommit"   # loaded by the other coordinator
        cluster.start_service(broker)
        broker = None
        txn.wait_state("CompleteCommit")
        cluster.start_service(victim)
    finally:
        if broker is not None:
            cluster.start_service(broker)
