"""Tests for services.clients.cluster and services.clients.metadata: the snapshot built from
hand-made MetadataResponses, the cache's refresh rules, and refreshing over a fake network."""

from __future__ import annotations

import threading

import pytest

from services.clients.cluster import Cluster, Node
from services.clients.metadata import Metadata
from services.clients.transport import ChannelPool
from services.common.clock import ManualClock
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.devcluster.proc import wait_until
from tests.unit.clients.support import metadata_response, node_proto, partition

BROKERS = [node_proto(1, 9092), node_proto(2, 9192)]
CONTROLLER = node_proto(1001, 9093)


def two_topics(epoch: int = 0, leader: int = 1) -> broker_pb2.MetadataResponse:
    return metadata_response(
        BROKERS, controller=CONTROLLER,
        topics={"a": [partition(1, 2, epoch=epoch, replicas=[2, 1], isr=[2]),
                      partition(0, leader, epoch=epoch, replicas=[1, 2], offline=[2])],
                "__consumer_offsets": [partition(0, 1)]},
        internal=("__consumer_offsets",))


def new_metadata(clock: ManualClock, **kwargs) -> Metadata:
    return Metadata("127.0.0.1:9092,127.0.0.1:9192", clock=clock, **kwargs)


# --------------------------------------------------------------------------------------------- Cluster

def test_cluster_from_response_holds_nodes_partitions_and_controller():
    cluster = Cluster.from_response(two_topics())
    assert cluster.cluster_id == "test-cluster"
    assert cluster.controller == Node(1001, "127.0.0.1", 9093)
    assert cluster.controller_id == 1001
    assert sorted(cluster.nodes) == [1, 2]
    a0, a1 = cluster.partitions_for("a")
    assert (a0.partition, a0.leader, a0.replicas, a0.isr, a0.offline_replicas) == (0, 1, (1, 2), (1, 2), (2,))
    assert (a1.partition, a1.leader, a1.isr) == (1, 2, (2,))
    assert cluster.leader_for("a", 1) == Node(2, "127.0.0.1", 9192)
    assert cluster.leader_for("a", 7) is None and cluster.leader_for("b", 0) is None
    assert cluster.topic_names() == ["__consumer_offsets", "a"]
    assert cluster.topic_names(include_internal=False) == ["a"]


def test_cluster_without_leader_or_with_unknown_leader_node_has_no_leader_for():
    response = metadata_response(BROKERS, topics={"t": [partition(0, -1), partition(1, 9)]})
    cluster = Cluster.from_response(response)
    assert cluster.leader_for("t", 0) is None
    assert cluster.leader_for("t", 1) is None
    assert cluster.controller is None


def test_bootstrap_cluster_uses_negative_ids_and_ipv6_addresses_are_bracketed():
    cluster = Cluster.bootstrap([("h1", 1), ("::1", 2)])
    assert cluster.is_bootstrap
    assert [n.node_id for n in cluster.nodes.values()] == [-1, -2]
    assert cluster.nodes[-2].address == "[::1]:2"


# --------------------------------------------------------------------------------------------- update rules

def test_update_applies_answer_and_counts_versions(clock: ManualClock):
    metadata = new_metadata(clock)
    assert metadata.cluster.is_bootstrap and metadata.update_requested
    metadata.update(two_topics())
    assert metadata.version == 1
    assert not metadata.update_requested
    assert metadata.leader_for("a", 0).node_id == 1
    assert [p.partition for p in metadata.partitions_for("a")] == [0, 1]
    assert metadata.controller.port == 9093 and metadata.cluster_id == "test-cluster"


def test_topic_errors_leave_topics_out_and_request_another_update(clock: ManualClock):
    metadata = new_metadata(clock)
    metadata.update(metadata_response(BROKERS, topics={"ok": [partition(0, 1)]},
                                      topic_errors={"missing": Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                                    "creating": Errors.LEADER_NOT_AVAILABLE}))
    assert metadata.partitions_for("missing") == () and metadata.partitions_for("creating") == ()
    assert metadata.topic_error("missing") == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata.topic_error("creating") == Errors.LEADER_NOT_AVAILABLE
    assert metadata.topic_error("ok") == 0
    assert metadata.update_requested


def test_a_partition_without_leader_requests_another_update(clock: ManualClock):
    metadata = new_metadata(clock)
    leaderless = partition(0, -1, error_code=Errors.LEADER_NOT_AVAILABLE)
    metadata.update(metadata_response(BROKERS, topics={"t": [leaderless]}))
    assert metadata.update_requested
    metadata.update(metadata_response(BROKERS, topics={"t": [partition(0, 2)]}))
    assert not metadata.update_requested


def test_answers_without_brokers_are_ignored_and_count_as_failed(clock: ManualClock):
    metadata = new_metadata(clock)
    metadata.update(two_topics())
    clock.advance(1000)
    metadata.update(broker_pb2.MetadataResponse(cluster_id="x"))
    assert metadata.version == 1
    assert metadata.cluster_id == "test-cluster"
    metadata.request_update()
    assert metadata.time_to_next_update() == 100  # the failure started a back-off


def test_stale_leader_epoch_keeps_the_newer_partition_info(clock: ManualClock):
    metadata = new_metadata(clock)
    metadata.update(two_topics(epoch=5, leader=1))
    metadata.update(two_topics(epoch=4, leader=2))  # a lagging broker's view
    assert metadata.partition("a", 0).leader == 1 and metadata.partition("a", 0).leader_epoch == 5
    assert metadata.update_requested
    metadata.update(two_topics(epoch=6, leader=2))
    assert metadata.partition("a", 0).leader == 2


def test_epochs_are_forgotten_when_the_topic_disappears_or_is_forgotten(clock: ManualClock):
    metadata = new_metadata(clock)
    metadata.update(two_topics(epoch=5))
    metadata.update(metadata_response(BROKERS, topic_errors={"a": Errors.UNKNOWN_TOPIC_OR_PARTITION}))
    metadata.update(two_topics(epoch=0, leader=2))  # recreated: epochs start again
    assert metadata.partition("a", 0).leader == 2
    metadata.forget_topics(["a"])
    metadata.update(two_topics(epoch=0, leader=1))
    assert metadata.partition("a", 0).leader == 1
    metadata.update(metadata_response(BROKERS, topics={}))
    metadata.update(two_topics(epoch=0, leader=2))
    assert metadata.partition("a", 0).leader == 2


def test_forgotten_topics_leave_the_tracked_set_and_the_snapshot_without_a_refresh(clock: ManualClock):
    metadata = new_metadata(clock, topics=["a", "b"])
    metadata.update(two_topics())
    metadata.forget_topics(["a"])
    assert metadata.topics == {"b"} and list(metadata.build_request().topics) == ["b"]
    assert metadata.partitions_for("a") == () and metadata.partitions_for("__consumer_offsets")
    assert not metadata.update_requested


def test_an_unknown_topic_keeps_an_update_requested_unless_unknown_topics_are_dropped(clock: ManualClock):
    gone = metadata_response(BROKERS, topic_errors={"gone": Errors.UNKNOWN_TOPIC_OR_PARTITION})
    keeping = new_metadata(clock, topics=["gone"])
    keeping.update(gone)
    assert keeping.topics == {"gone"} and keeping.update_requested  # a producer waits for it to appear
    dropping = new_metadata(clock, topics=["gone"], keep_unknown_topics=False)
    dropping.update(gone)
    assert dropping.topics == frozenset() and not dropping.update_requested
    assert dropping.topic_error("gone") == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_refresh_timing_follows_backoff_and_max_age(clock: ManualClock):
    metadata = new_metadata(clock, retry_backoff_ms=100, metadata_max_age_ms=5000)
    assert metadata.time_to_next_update() == 0 and metadata.update_due()
    metadata.update(two_topics())
    assert metadata.time_to_next_update() == 5000 and not metadata.update_due()
    version = metadata.request_update()
    assert version == 1 and metadata.update_due()
    assert metadata.time_to_next_update() == 100  # due, but not allowed before the back-off
    clock.advance(100)
    assert metadata.time_to_next_update() == 0
    metadata.update(two_topics())
    clock.advance(4999)
    assert metadata.time_to_next_update() == 1
    clock.advance(1)
    assert metadata.update_due() and metadata.time_to_next_update() == 0


def test_failed_update_backs_off_and_keeps_the_error(clock: ManualClock):
    metadata = new_metadata(clock)
    error = KafkaError("down", error=Errors.NETWORK_EXCEPTION)
    metadata.failed_update(error)
    assert metadata.last_error is error
    assert metadata.time_to_next_update() == 100
    metadata.update(two_topics())
    assert metadata.last_error is None


def test_tracked_topics_shape_the_request(clock: ManualClock):
    metadata = new_metadata(clock)
    metadata.update(two_topics())
    assert metadata.build_request() == broker_pb2.MetadataRequest(topics=[])
    assert metadata.add_topics("b", "a") and metadata.update_requested
    assert not metadata.add_topics("a")
    assert list(metadata.build_request().topics) == ["a", "b"]
    everything = new_metadata(clock, all_topics=True)
    assert everything.build_request().all_topics


def test_await_update_wakes_on_a_newer_version(clock: ManualClock):
    metadata = new_metadata(clock)
    assert not metadata.await_update(0, timeout_ms=10)
    updater = threading.Thread(target=metadata.update, args=(two_topics(),))
    updater.start()
    assert metadata.await_update(0, timeout_ms=10_000)
    updater.join()


class LoadView:
    """The two questions least_loaded_nodes asks of a pool."""

    def __init__(self, in_flight: dict[str, int], backing_off: set[str] = frozenset()):
        self._in_flight = in_flight
        self._backing_off = backing_off

    def in_flight(self, target: str) -> int:
        return self._in_flight.get(target, 0)

    def is_backing_off(self, target: str) -> bool:
        return target in self._backing_off


def test_least_loaded_prefers_idle_nodes_then_bootstrap_addresses(clock: ManualClock):
    metadata = Metadata("10.0.0.9:9092,127.0.0.1:9092", clock=clock)
    bootstrap = {n.address for n in metadata.least_loaded_nodes(LoadView({}))}
    assert bootstrap == {"10.0.0.9:9092", "127.0.0.1:9092"}
    metadata.update(two_topics())
    view = LoadView({"127.0.0.1:9092": 3, "127.0.0.1:9192": 1})
    order = [n.address for n in metadata.least_loaded_nodes(view)]
    assert order[:2] == ["127.0.0.1:9192", "127.0.0.1:9092"]
    assert order[2:] == ["10.0.0.9:9092"]  # the bootstrap address not among the brokers
    failed = LoadView({}, backing_off={"127.0.0.1:9192"})
    assert [n.address for n in metadata.least_loaded_nodes(failed)][-1] == "127.0.0.1:9192"


# --------------------------------------------------------------------------------------------- refreshing

def test_refresh_asks_a_reachable_node_when_another_is_down(fake_nodes, clock: ManualClock):
    (broker,) = fake_nodes(1)
    broker.on("Metadata", metadata_response([broker.node()], controller=CONTROLLER,
                                            topics={"t": [partition(0, 1)]}))
    metadata = Metadata(f"127.0.0.1:1,{broker.address}", clock=clock, topics=["t"])
    with ChannelPool(request_timeout_ms=5000, clock=clock) as pool:
        cluster = metadata.refresh(pool)
    assert cluster.leader_for("t", 0).address == broker.address
    assert list(broker.requests("Metadata")[0].topics) == ["t"]
    assert not broker.requests("Metadata")[0].allow_auto_topic_creation


def test_refresh_fails_with_the_last_error_when_nothing_answers(clock: ManualClock):
    metadata = Metadata("127.0.0.1:1", clock=clock)
    with ChannelPool(request_timeout_ms=2000, clock=clock) as pool, pytest.raises(KafkaError) as raised:
        metadata.refresh(pool)
    assert raised.value.error_name == "NETWORK_EXCEPTION"
    assert metadata.last_error is raised.value
    assert metadata.time_to_next_update() == 100  # never succeeded, so due once the back-off passes


def test_refresh_waits_out_the_backoff_and_maybe_refresh_skips_fresh_data(fake_nodes, clock: ManualClock):
    (broker,) = fake_nodes(1)
    broker.on("Metadata", metadata_response([broker.node()]))
    metadata = Metadata(broker.address, clock=clock)
    with ChannelPool(clock=clock) as pool:
        metadata.refresh(pool)
        metadata.maybe_refresh(pool)
        assert len(broker.requests("Metadata")) == 1 and clock.monotonic_ms() == 0
        metadata.refresh(pool)  # forced: sleeps (on the manual clock) until the back-off passed
        assert len(broker.requests("Metadata")) == 2 and clock.monotonic_ms() == 100
        metadata.request_update()
        metadata.maybe_refresh(pool)
        assert len(broker.requests("Metadata")) == 3


class CountingLock:
    """A lock that counts acquire calls, so a test can tell when threads are queued on it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._calls = 0
        self._calls_lock = threading.Lock()

    @property
    def calls(self) -> int:
        with self._calls_lock:
            return self._calls

    def acquire(self, timeout: float = -1) -> bool:
        with self._calls_lock:
            self._calls += 1
        return self._lock.acquire(timeout=timeout)

    def release(self) -> None:
        self._lock.release()


def test_concurrent_refreshes_collapse_into_one_call(fake_nodes):
    (broker,) = fake_nodes(1)
    entered, release = threading.Event(), threading.Event()

    def slow_metadata(_request, _context):
        entered.set()
        assert release.wait(10)
        return metadata_response([broker.node()])

    broker.on("Metadata", slow_metadata)
    metadata = Metadata(broker.address)
    metadata._refresh_lock = CountingLock()
    with ChannelPool() as pool:
        threads = [threading.Thread(target=metadata.refresh, args=(pool,)) for _ in range(3)]
        threads[0].start()
        assert entered.wait(10)
        for thread in threads[1:]:
            thread.start()
        wait_until(lambda: metadata._refresh_lock.calls == 3, 10, message="refreshes to queue up")
        release.set()
        for thread in threads:
            thread.join(10)
    assert len(broker.requests("Metadata")) == 1
    assert metadata.version == 1
