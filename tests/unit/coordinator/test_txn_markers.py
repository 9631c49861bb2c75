"""`TxnMarkerWriter`: one WriteTxnMarkers request per destination carrying every transaction bound
there, `__consumer_offsets` partitions to their owning coordinator, deleted topics counted done,
retries of errors and unroutable partitions, and giving up once fenced."""

from __future__ import annotations

from services.clients.cluster import Cluster, Node, PartitionInfo
from services.clients.transport import BROKER, COORDINATOR
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.common.zk.coordinators import CoordinatorInfo, CoordinatorOwnership, PartitionOwner
from services.coordinator.txn.effects import TxnMarkers
from services.coordinator.txn_markers import TxnMarkerWriter, cached_unknown_partitions

B1, B2 = Node(1, "b1", 9092), Node(2, "b2", 9092)


def cluster(leaders: dict[tuple[str, int], int], deleted: tuple[str, ...] = ()) -> Cluster:
    topics: dict[str, list[PartitionInfo]] = {}
    for (topic, partition), leader in leaders.items():
        topics.setdefault(topic, []).append(PartitionInfo(topic, partition, leader, 0, (leader,), (leader,)))
    return Cluster(nodes={1: B1, 2: B2}, topics={t: tuple(p) for t, p in topics.items()},
                   topic_errors={t: Errors.UNKNOWN_TOPIC_OR_PARTITION for t in deleted})


class FakeMetadata:
    def __init__(self, current: Cluster) -> None:
        self.current = current
        self.updates = 0

    def add_topics(self, *topics: str) -> bool:
        return False

    def request_update(self) -> None:
        self.updates += 1

    def maybe_refresh(self, pool, timeout_ms) -> Cluster:
        return self.current


class FakePool:
    """Answers each call with `answer(target, service, request)` and records it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, common_pb2.WriteTxnMarkersRequest]] = []
        self.codes: dict[tuple[str, int], int] = {}
        self.refuse: dict[str, KafkaError] = {}

    def call_many(self, calls):
        answers = []
        for target, service, method, request, _ in calls:
            assert method == "WriteTxnMarkers"
            self.calls.append((target, service, request))
            if target in self.refuse:
                answers.append(self.refuse[target])
                continue
            response = common_pb2.WriteTxnMarkersResponse()
            for marker in request.markers:
                out = response.markers.add(producer_id=marker.producer_id)
                for topic in marker.topics:
                    written = out.topics.add(name=topic.name)
                    for index in topic.partition_indexes:
                        written.partitions.add(partition_index=index,
                                               error_code=self.codes.get((topic.name, index), Errors.NONE))
            answers.append(response)
        return answers


class FakeClient:
    def __init__(self, current: Cluster) -> None:
        self.metadata = FakeMetadata(current)
        self.pool = FakePool()


def directory() -> DirectorySnapshot:
    owner = {TopicPartition("__consumer_offsets", 7): PartitionOwner(2001, 3)}
    return DirectorySnapshot({2001: CoordinatorInfo(2001, "c1:9094")}, CoordinatorOwnership(owner))


def markers(transactional_id: str, producer_id: int, *partitions: tuple[str, int], commit: bool = True,
            txn_partition: int = 0) -> TxnMarkers:
    return TxnMarkers(transactional_id, producer_id, 4, commit, 9, txn_partition,
                      frozenset(TopicPartition(t, p) for t, p in partitions))


def writer_for(current: Cluster) -> tuple[TxnMarkerWriter, FakeClient, list[str]]:
    client = FakeClient(current)
    done: list[str] = []
    return TxnMarkerWriter(client, directory, start=False), client, done


def test_one_request_per_destination_with_every_transaction():
    writer, client, done = writer_for(cluster({("t", 0): 1, ("t", 1): 2, ("u", 0): 1}))
    writer.send(markers("a", 100, ("t", 0), ("t", 1)), lambda: done.append("a"))
    writer.send(markers("b", 200, ("u", 0), ("__consumer_offsets", 7), commit=False), lambda: done.append("b"))
    assert writer.run_round() is False
    assert sorted(done) == ["a", "b"]
    by_target = {(target, service): request for target, service, request in client.pool.calls}
    assert set(by_target) == {("b1:9092", BROKER), ("b2:9092", BROKER), ("c1:9094", COORDINATOR)}
    to_b1 = by_target[("b1:9092", BROKER)]
    assert [(m.producer_id, m.transaction_result, m.producer_epoch, m.coordinator_epoch) for m in to_b1.markers] \
        == [(100, True, 4, 9), (200, False, 4, 9)]
    assert [(t.name, list(t.partition_indexes)) for t in by_target[("c1:9094", COORDINATOR)].markers[0].topics] \
        == [("__consumer_offsets", [7])]


def test_errors_and_unroutable_partitions_are_retried():
    writer, client, done = writer_for(cluster({("t", 0): 1, ("t", 1): -1}))
    client.pool.codes[("t", 0)] = Errors.NOT_LEADER_OR_FOLLOWER
    writer.send(markers("a", 100, ("t", 0), ("t", 1)), lambda: done.append("a"))
    assert writer.run_round() is True and done == []
    assert client.metadata.updates >= 1
    client.pool.codes.clear()
    client.metadata.current = cluster({("t", 0): 2, ("t", 1): 1})
    assert writer.run_round() is False and done == ["a"]
    assert {target for target, _, _ in client.pool.calls[-2:]} == {"b1:9092", "b2:9092"}


def test_a_deleted_topic_counts_as_done():
    writer, client, done = writer_for(cluster({("t", 0): 1}, deleted=("gone",)))
    writer.send(markers("a", 100, ("t", 0), ("gone", 0), ("t", 5)), lambda: done.append("a"))
    assert writer.run_round() is False and done == ["a"]
    assert [(t.name, list(t.partition_indexes)) for t in client.pool.calls[0][2].markers[0].topics] == [("t", [0])]


def test_failed_calls_are_retried_but_an_unimplemented_one_counts_as_written():
    writer, client, done = writer_for(cluster({("t", 0): 1}))
    client.pool.refuse["b1:9092"] = KafkaError("down", error=Errors.NETWORK_EXCEPTION)
    client.pool.refuse["c1:9094"] = KafkaError("no such method", error=Errors.UNSUPPORTED_VERSION)
    writer.send(markers("a", 100, ("t", 0), ("__consumer_offsets", 7)), lambda: done.append("a"))
    assert writer.run_round() is True and done == []
    del client.pool.refuse["b1:9092"]
    assert writer.run_round() is False and done == ["a"]


def test_a_fenced_transaction_is_given_up_and_a_forgotten_one_not_sent():
    writer, client, done = writer_for(cluster({("t", 0): 1, ("u", 0): 1}))
    client.pool.codes[("t", 0)] = Errors.TRANSACTION_COORDINATOR_FENCED
    writer.send(markers("a", 100, ("t", 0)), lambda: done.append("a"))
    assert writer.run_round() is False and done == [] and writer.pending() == 0
    writer.send(markers("b", 200, ("u", 0), txn_partition=3), lambda: done.append("b"))
    writer.forget(3)
    calls = len(client.pool.calls)
    assert writer.run_round() is False and done == [] and len(client.pool.calls) == calls


def test_partitions_the_metadata_cache_knows_are_answered_without_a_refresh():
    client = FakeClient(cluster({("t", 0): 1, ("t", 1): 2}))
    client.metadata.cluster = client.metadata.current
    client.metadata.all_topics, client.metadata.topics = False, frozenset({"t"})
    assert cached_unknown_partitions(client, [TopicPartition("t", 0), TopicPartition("t", 1)]) == set()
    assert cached_unknown_partitions(client, [TopicPartition("t", 0), TopicPartition("t", 2)]) is None
    assert cached_unknown_partitions(client, [TopicPartition("u", 0)]) is None
    client.metadata.topics = frozenset()  # known, but not tracked: a refresh would not keep it current
    assert cached_unknown_partitions(client, [TopicPartition("t", 0)]) is None
    assert client.metadata.updates == 0
