"""OdradekZkClient against a real ZooKeeper: registrations and epochs, topic and partition state
versions, conditional ISR updates, controller election and controller-epoch fencing of a zombie
controller, ISR change notifications, producer id blocks, coordinators and the legacy consumer."""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import EventType

from services.common.clock import ManualClock
from services.common.errors import Errors, KafkaError
from services.common.shared_types import BrokerInfo, EndPoint
from services.common.topic_partition import TopicPartition
from services.common.zk import (
    CONFLICT,
    PERSISTENT_PATHS,
    ControllerEpoch,
    ControllerMovedError,
    CoordinatorOwnership,
    DuplicateRegistrationError,
    OdradekZkClient,
    PartitionStateZnode,
    TopicAssignment,
    Versioned,
    ZkEvent,
    enqueue_watch,
    new_topic_id,
)
from tests.conftest import ZK_SESSION_TIMEOUT_S
from tests.integration.zk_session_expiry import expire_session

WAIT_S = 10.0
TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


@pytest.fixture
def zk(zk_client: KazooClient) -> OdradekZkClient:
    client = OdradekZkClient(zk_client, ManualClock())
    client.ensure_paths()
    return client


@pytest.fixture
def new_session(zookeeper, zk_chroot: str) -> Iterator[Callable[[], OdradekZkClient]]:
    """Opens further ZooKeeper sessions on this test's chroot, each closed when the test ends."""
    clients: list[KazooClient] = []

    def open_session() -> OdradekZkClient:
        client = KazooClient(hosts=zookeeper.connect_string + zk_chroot, timeout=ZK_SESSION_TIMEOUT_S)
        client.start(timeout=WAIT_S)
        clients.append(client)
        return OdradekZkClient(client, ManualClock())

    yield open_session
    for client in clients:
        client.stop()
        client.close()


def next_event(events: queue.Queue[ZkEvent]) -> ZkEvent:
    try:
        return events.get(timeout=WAIT_S)
    except queue.Empty:
        raise AssertionError(f"no watch event within {WAIT_S}s") from None


def broker_info(broker_id: int, port: int = 9092) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("127.0.0.1", port),), rack="r1", timestamp_ms=1)


def run_concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Runs the calls on threads released together; each result is a value or the raised exception."""
    start = threading.Barrier(len(calls), timeout=WAIT_S)
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        start.wait()
        try:
            results[index] = call()
        except Exception as exc:  # handed back to the test to assert on
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 3)
        assert not thread.is_alive(), "a concurrent call did not finish"
    return results


@contextlib.contextmanager
def session_expired(zookeeper, zk_chroot: str, victim: KazooClient) -> Iterator[None]:
    """Expires `victim`'s session on the server (a twin connection with the same session id closes
    it); on exit, waits until kazoo has reconnected `victim` with a new session."""
    states: queue.Queue[KazooState] = queue.Queue()
    victim.add_listener(states.put_nowait)
    old_session = victim.client_id[0]
    expire_session(zookeeper.connect_string, victim, WAIT_S)
    try:
        yield
    finally:
        seen = []
        while KazooState.CONNECTED not in seen or victim.client_id[0] == old_session:
            seen.append(states.get(timeout=WAIT_S))
        victim.remove_listener(states.put_nowait)
    assert KazooState.LOST in seen


# -- top-level paths, cluster id, broker sequence ids ------------------------------------------


def test_ensure_paths_creates_kafkas_persistent_paths_once(zk: OdradekZkClient) -> None:
    zk.zk.set("/brokers/seqid", b"")
    zk.ensure_paths()

    for path in PERSISTENT_PATHS:
        assert zk.zk.exists(path) is not None, path
    assert zk.zk.exists("/brokers/seqid").version == 1
    assert zk.get_live_broker_ids() == [] and zk.get_all_topics() == []


def test_cluster_id_is_created_once(zk: OdradekZkClient, new_session) -> None:
    other = new_session()

    first, second = run_concurrently(zk.get_or_create_cluster_id, other.get_or_create_cluster_id)

    assert first == second == zk.get_cluster_id()
    assert json.loads(zk.zk.get("/cluster/id")[0]) == {"version": "1", "id": first}


def test_broker_sequence_ids_increase(zk: OdradekZkClient) -> None:
    assert [zk.generate_broker_sequence_id() for _ in range(3)] == [1, 2, 3]


# -- brokers ---------------------------------------------------------------------------------


def test_broker_registration_epoch_is_the_czxid(zk: OdradekZkClient, new_session) -> None:
    epoch = zk.register_broker(broker_info(1))

    stat = zk.zk.exists("/brokers/ids/1")
    assert epoch == stat.czxid
    assert stat.ephemeralOwner == zk.zk.client_id[0]
    found = zk.get_broker(1)
    assert found == replace(broker_info(1), broker_epoch=epoch)
    assert json.loads(zk.zk.get("/brokers/ids/1")[0])["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert zk.register_broker(broker_info(1)) == epoch  # the same session registering again

    other = new_session()
    with pytest.raises(DuplicateRegistrationError) as duplicate:
        other.register_broker(broker_info(1, 9999))
    assert duplicate.value.code == Errors.DUPLICATE_BROKER_REGISTRATION
    later = other.register_broker(broker_info(2, 9093))
    assert later > epoch
    assert zk.get_live_broker_ids() == [1, 2]
    assert {i: b.broker_epoch for i, b in zk.get_all_brokers().items()} == {1: epoch, 2: later}


def test_ephemeral_registrations_vanish_when_the_session_closes(zk: OdradekZkClient, new_session) -> None:
    member = new_session()
    member.register_broker(broker_info(3))
    member.register_coordinator(8, "127.0.0.1:9094")
    member.register_legacy_consumer("g", "g_c1", {"orders": 1})
    assert member.claim_partition("g", TP0, "g_c1-0")
    events: queue.Queue[ZkEvent] = queue.Queue()
    assert zk.get_live_broker_ids(watch=enqueue_watch(events, "broker_change")) == [3]

    member.zk.stop()

    assert next_event(events) == ZkEvent("broker_change", EventType.CHILD, "/brokers/ids")
    assert zk.get_live_broker_ids() == []
    assert zk.get_broker(3) is None
    assert zk.get_live_coordinator_ids() == []
    assert zk.get_legacy_consumer_ids("g") == []
    assert zk.get_partition_owner("g", TP0) is None


# -- topics and partition states -------------------------------------------------------------


def test_topic_assignment_round_trips_with_versions(zk: OdradekZkClient) -> None:
    epoch = zk.elect_controller(1)
    assignment = TopicAssignment.of("orders", {0: [1, 2, 3], 1: [2, 3, 1]}, new_topic_id())
    zk.create_topic(assignment, {"cleanup.policy": "compact"})

    assert zk.get_topic_assignment("orders") == Versioned(assignment, 0)
    assert zk.get_all_topics() == ["orders"]
    assert zk.get_topic_config("orders") == {"cleanup.policy": "compact"}
    with pytest.raises(KafkaError) as exists:
        zk.create_topic(TopicAssignment.of("orders", {0: [1]}))
    assert exists.value.code == Errors.TOPIC_ALREADY_EXISTS
    assert zk.get_topic_config("orders") == {"cleanup.policy": "compact"}

    grown = TopicAssignment.of("orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, assignment.topic_id)
    assert zk.set_topic_assignment(grown, epoch_zk_version=None, expected_version=0) == 1
    assert zk.set_topic_assignment(grown, epoch_zk_version=epoch.zk_version) == 2
    assert zk.get_topic_assignments(["orders", "absent"]) == {"orders": Versioned(grown, 2)}


def test_partition_states_are_created_and_rewritten_by_version(zk: OdradekZkClient) -> None:
    epoch = zk.elect_controller(1)
    zk.create_topic(TopicAssignment.of("orders", {0: [1, 2], 1: [2, 1]}))
    initial = {TP0: PartitionStateZnode(1, 0, (1, 2), epoch.epoch), TP1: PartitionStateZnode(2, 0, (2, 1), epoch.epoch)}

    zk.create_partition_states(initial, epoch_zk_version=epoch.zk_version)

    assert zk.get_partition_states([TP0, TP1, TopicPartition("orders", 9)]) == {
        TP0: Versioned(initial[TP0], 0),
        TP1: Versioned(initial[TP1], 0),
    }
    assert zk.get_partitions("orders") == [0, 1]
    moved = PartitionStateZnode(2, 1, (2,), epoch.epoch)
    result = zk.set_partition_states(
        {TP0: Versioned(moved, 0), TP1: Versioned(moved, 5)}, epoch_zk_version=epoch.zk_version
    )
    assert result.updated == {TP0: 1}
    assert result.retry == [TP1]
    assert zk.get_partition_state(TP0) == Versioned(moved, 1)
    assert zk.get_partition_state(TP1) == Versioned(initial[TP1], 0)


def test_leader_isr_update_with_a_stale_version_fails(zk: OdradekZkClient) -> None:
    epoch = zk.elect_controller(1)
    zk.create_topic(TopicAssignment.of("orders", {0: [1, 2, 3]}))
    state = PartitionStateZnode(1, 3, (1, 2, 3), epoch.epoch)
    zk.create_partition_states({TP0: state}, epoch_zk_version=epoch.zk_version)

    shrunk = PartitionStateZnode(1, 3, (1, 2), epoch.epoch)
    assert zk.update_leader_and_isr(TP0, shrunk, expected_version=0) == (True, 1)
    expanded_from_stale = PartitionStateZnode(1, 3, (1, 2, 3), epoch.epoch)
    assert zk.update_leader_and_isr(TP0, expanded_from_stale, expected_version=0) == CONFLICT

    assert zk.get_partition_state(TP0) == Versioned(shrunk, 1)
    assert zk.update_leader_and_isr(TopicPartition("absent", 0), shrunk, 0) == CONFLICT


def test_topic_config_change_is_announced(zk: OdradekZkClient) -> None:
    zk.create_topic(TopicAssignment.of("orders", {0: [1]}))
    events: queue.Queue[ZkEvent] = queue.Queue()
    assert zk.get_config_change_notifications(watch=enqueue_watch(events, "config_change")) == []

    zk.set_topic_config("orders", {"retention.ms": "1000"})

    assert next_event(events).type == EventType.CHILD
    [name] = zk.get_config_change_notifications()
    assert name.startswith("config_change_")
    assert zk.get_config_change(name) == "topics/orders"
    assert zk.get_topic_config("orders") == {"retention.ms": "1000"}
    zk.delete_config_change_notifications([name, "config_change_9999999999"])
    assert zk.get_config_change_notifications() == []


def test_controller_deletes_a_topic_atomically(zk: OdradekZkClient) -> None:
    epoch = zk.elect_controller(1)
    zk.create_topic(TopicAssignment.of("orders", {0: [1], 1: [1]}), {"retention.ms": "1"})
    zk.create_partition_states(
        {TP0: PartitionStateZnode(1, 0, (1,), 1), TP1: PartitionStateZnode(1, 0, (1,), 1)},
        epoch_zk_version=epoch.zk_version,
    )
    events: queue.Queue[ZkEvent] = queue.Queue()
    assert zk.get_topic_deletions(watch=enqueue_watch(events, "topic_deletion")) == []

    assert zk.request_topic_deletion("orders") is True
    assert zk.request_topic_deletion("orders") is False
    assert next_event(events).kind == "topic_deletion"
    assert zk.get_topic_deletions() == ["orders"]
    zk.delete_topic("orders", epoch_zk_version=epoch.zk_version)

    assert zk.get_all_topics() == [] and zk.get_topic_deletions() == []
    assert zk.zk.exists("/config/topics/orders") is None


def test_admin_requests(zk: OdradekZkClient) -> None:
    epoch = zk.elect_controller(1)
    zk.zk.create(
        "/admin/reassign_partitions",
        b'{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,1]}]}',
    )

    assert zk.get_partition_reassignment() == {TP0: [2, 1]}
    assert zk.request_preferred_replica_election([TP0, TP1]) is True
    assert zk.request_preferred_replica_election([TP0]) is False
    assert zk.get_preferred_replica_election() == {TP0, TP1}
    zk.delete_partition_reassignment(epoch_zk_version=epoch.zk_version)
    zk.delete_preferred_replica_election(epoch_zk_version=epoch.zk_version)
    assert zk.get_partition_reassignment() is None and zk.get_preferred_replica_election() is None


def test_partitions_leave_the_legacy_reassignment_znode(zk: OdradekZkClient) -> None:
    epoch = zk.elect_controller(1)
    assert zk.create_partition_reassignment({TP0: [2, 1], TP1: [3]}) is True
    assert zk.create_partition_reassignment({TP0: [1]}) is False
    # only where the znode still names the given target
    zk.remove_from_partition_reassignment([(TP0, [1, 2]), (TP1, [3])], epoch_zk_version=epoch.zk_version)
    assert zk.get_partition_reassignment() == {TP0: [2, 1]}
    with pytest.raises(ControllerMovedError):
        zk.remove_from_partition_reassignment([(TP0, None)], epoch_zk_version=epoch.zk_version + 1)
    zk.remove_from_partition_reassignment([(TP0, None)], epoch_zk_version=epoch.zk_version)
    assert zk.get_partition_reassignment() is None


# -- controller election and fencing ---------------------------------------------------------


def test_two_controllers_race_and_one_wins(zk: OdradekZkClient, new_session) -> None:
    first, second = new_session(), new_session()

    results = run_concurrently(
        lambda: first.elect_controller(1, "127.0.0.1:9101"),
        lambda: second.elect_controller(2, "127.0.0.1:9102"),
    )

    [winner] = [i for i, r in enumerate(results) if isinstance(r, ControllerEpoch)]
    loser = 1 - winner
    assert results[winner] == ControllerEpoch(1, 1)
    assert isinstance(results[loser], ControllerMovedError)
    active = (first, second)[loser].get_controller()
    assert active.controller_id == winner + 1
    assert active.endpoint == f"127.0.0.1:910{winner + 1}"
    assert zk.get_controller_epoch() == ControllerEpoch(1, 1)
    assert json.loads(zk.zk.get("/controller")[0])["brokerid"] == winner + 1


def test_controller_watch_enqueues_creation_and_deletion(zk: OdradekZkClient, new_session) -> None:
    events: queue.Queue[ZkEvent] = queue.Queue()
    watch = enqueue_watch(events, "controller_change")
    assert zk.get_controller(watch=watch) is None
    candidate = new_session()

    epoch = candidate.elect_controller(4)

    assert next_event(events) == ZkEvent("controller_change", EventType.CREATED, "/controller")
    assert zk.get_controller(watch=watch).controller_id == 4
    candidate.delete_controller(epoch_zk_version=epoch.zk_version)
    assert next_event(events) == ZkEvent("controller_change", EventType.DELETED, "/controller")


def test_a_deposed_controller_is_fenced(zookeeper, zk_chroot: str, zk: OdradekZkClient, new_session) -> None:
    controller_a, controller_b = new_session(), new_session()
    epoch_a = controller_a.elect_controller(1, "127.0.0.1:9101")
    assert epoch_a == ControllerEpoch(1, 1)
    zk.create_topic(TopicAssignment.of("orders", {0: [1, 2], 1: [2, 1]}))
    controller_a.create_partition_states(
        {TP0: PartitionStateZnode(1, 0, (1, 2), 1)}, epoch_zk_version=epoch_a.zk_version
    )
    controller_changes: queue.Queue[ZkEvent] = queue.Queue()
    assert (
        controller_b.get_controller(watch=enqueue_watch(controller_changes, "controller_change")) is not None
    )

    with session_expired(zookeeper, zk_chroot, controller_a.zk):  # A stalls; its /controller goes
        assert next_event(controller_changes).type == EventType.DELETED
        epoch_b = controller_b.elect_controller(2, "127.0.0.1:9102")
    assert epoch_b == ControllerEpoch(2, 2)

    # A, reconnected with a new session, still believes it is the controller at epoch 1.
    with pytest.raises(ControllerMovedError) as moved:
        controller_a.create_partition_states(
            {TP1: PartitionStateZnode(2, 0, (2, 1), 1)}, epoch_zk_version=epoch_a.zk_version
        )
    assert moved.value.code == Errors.STALE_CONTROLLER_EPOCH
    assert zk.get_partitions("orders") == [0]  # not even the parent znode of partition 1 was created
    with pytest.raises(ControllerMovedError):
        controller_a.set_partition_states(
            {TP0: Versioned(PartitionStateZnode(1, 1, (1,), 1), 0)}, epoch_zk_version=epoch_a.zk_version
        )
    with pytest.raises(ControllerMovedError):
        controller_a.delete_topic("orders", epoch_zk_version=epoch_a.zk_version)
    with pytest.raises(ControllerMovedError):
        controller_a.delete_controller(epoch_zk_version=epoch_a.zk_version)
    assert zk.get_partition_state(TP0) == Versioned(PartitionStateZnode(1, 0, (1, 2), 1), 0)
    assert zk.get_controller().controller_id == 2
    assert zk.get_topic_assignment("orders") is not None

    controller_b.create_partition_states(
        {TP1: PartitionStateZnode(2, 0, (2, 1), 2)}, epoch_zk_version=epoch_b.zk_version
    )
    updated = controller_b.set_partition_states(
        {TP0: Versioned(PartitionStateZnode(2, 1, (2,), 2), 0)}, epoch_zk_version=epoch_b.zk_version
    )
    assert updated.updated == {TP0: 1}
    assert zk.get_partition_state(TP1) == Versioned(PartitionStateZnode(2, 0, (2, 1), 2), 0)
    assert controller_a.get_controller().endpoint == "127.0.0.1:9102"


# -- ISR change notifications ----------------------------------------------------------------


def test_isr_change_notifications_sequence(zk: OdradekZkClient, new_session) -> None:
    broker = new_session()
    epoch = zk.elect_controller(1)
    events: queue.Queue[ZkEvent] = queue.Queue()
    assert zk.get_isr_change_notifications(watch=enqueue_watch(events, "isr_change")) == []

    first = broker.create_isr_change_notification([TP0])
    assert next_event(events) == ZkEvent("isr_change", EventType.CHILD, "/isr_change_notification")
    second = broker.create_isr_change_notification([TP0, TP1])
    third = broker.create_isr_change_notification([TopicPartition("clicks", 3)])

    pending = zk.get_isr_change_notifications()
    assert pending == [first, second, third] == sorted(pending)
    assert int(first) < int(second) < int(third)
    assert zk.get_isr_change_partitions(pending[:2]) == {TP0, TP1}
    assert json.loads(zk.zk.get(f"/isr_change_notification/isr_change_{third}")[0]) == {
        "version": 1,
        "partitions": [{"topic": "clicks", "partition": 3}],
    }

    zk.delete_isr_change_notifications(pending[:2] + ["9999999999"], epoch_zk_version=epoch.zk_version)
    assert zk.get_isr_change_notifications() == [third]
    with pytest.raises(ControllerMovedError):
        zk.delete_isr_change_notifications([third], epoch_zk_version=epoch.zk_version + 1)
    assert zk.get_isr_change_notifications() == [third]


# -- producer ids and coordinators -----------------------------------------------------------


def test_concurrent_producer_id_blocks_never_overlap(zk: OdradekZkClient, new_session) -> None:
    allocators = [new_session(), new_session()]
    blocks_each = 15

    def allocate(index: int) -> list:
        return [allocators[index].allocate_producer_id_block(index + 1) for _ in range(blocks_each)]

    first, second = run_concurrently(lambda: allocate(0), lambda: allocate(1))

    blocks = sorted(first + second, key=lambda b: b.block_start)
    assert [b.block_start for b in blocks] == [i * 1000 for i in range(2 * blocks_each)]
    assert all(b.block_end == b.block_start + 999 for b in blocks)
    assert {b.broker_id for b in first} == {1} and {b.broker_id for b in second} == {2}
    latest = json.loads(zk.zk.get("/latest_producer_id_block")[0])
    assert latest["block_end"] == str(2 * blocks_each * 1000 - 1)


def test_coordinator_registry_and_ownership(zk: OdradekZkClient, new_session) -> None:
    other = new_session()
    epoch = zk.register_coordinator(1, "127.0.0.1:9094")
    other.register_coordinator(2, "127.0.0.1:9095")
    assert zk.get_live_coordinator_ids() == [1, 2]
    assert zk.get_coordinators()[2].endpoint == "127.0.0.1:9095"
    assert epoch == zk.zk.exists("/coordinators/ids/1").czxid

    offsets = [TopicPartition("__consumer_offsets", p) for p in range(4)]
    assert zk.get_coordinator_ownership() is None
    initial = CoordinatorOwnership().reassigned({tp: 1 + tp.partition % 2 for tp in offsets})
    assert zk.set_coordinator_ownership(initial, None) == (True, 0)
    assert other.set_coordinator_ownership(initial, None) == CONFLICT

    current = other.get_coordinator_ownership()
    assert current == Versioned(initial, 0)
    rebalanced = current.value.reassigned({tp: 2 for tp in offsets})
    assert other.set_coordinator_ownership(rebalanced, current.version) == (True, 1)
    assert zk.set_coordinator_ownership(initial, current.version) == CONFLICT
    # partitions 0 and 2 moved from coordinator 1 to 2 (epoch 1); 1 and 3 stayed with 2 (epoch 0)
    assert zk.get_coordinator_ownership().value.owned_by(2) == {
        offsets[0]: 1,
        offsets[1]: 0,
        offsets[2]: 1,
        offsets[3]: 0,
    }
    assert zk.get_coordinator_ownership().value.owned_by(1) == {}


# -- legacy consumer -------------------------------------------------------------------------


def test_legacy_consumer_paths(zk: OdradekZkClient, new_session) -> None:
    other = new_session()
    events: queue.Queue[ZkEvent] = queue.Queue()
    assert zk.get_legacy_consumer_ids("g", watch=enqueue_watch(events, "group_members")) == []

    zk.register_legacy_consumer("g", "g_c1", {"orders": 2})
    other.register_legacy_consumer("g", "g_c2", {"orders": 1})

    assert next_event(events).kind == "group_members"
    assert zk.get_legacy_consumer_ids("g") == ["g_c1", "g_c2"]
    registration = other.get_legacy_consumer("g", "g_c1")
    assert (registration.subscription, registration.pattern) == ({"orders": 2}, "static")
    assert json.loads(zk.zk.get("/consumers/g/ids/g_c1")[0])["version"] == 1

    assert zk.claim_partition("g", TP0, "g_c1-0") is True
    assert other.claim_partition("g", TP0, "g_c2-0") is False
    assert other.get_partition_owner("g", TP0) == "g_c1-0"
    zk.release_partition("g", TP0)
    assert other.claim_partition("g", TP0, "g_c2-0") is True

    assert zk.get_legacy_offset("g", TP0) is None
    zk.commit_legacy_offset("g", TP0, 41)
    other.commit_legacy_offset("g", TP0, 42)
    assert zk.get_legacy_offset("g", TP0) == 42
    assert zk.zk.get("/consumers/g/offsets/orders/0")[0] == b"42"


def test_legacy_wildcard_members_and_pipelined_offsets(zk: OdradekZkClient) -> None:
    zk.register_legacy_consumer("w", "w_c1", {"ord.*": 3}, pattern="white_list")
    zk.register_legacy_consumer("w", "w_c2", {"orders": 1})
    members = zk.get_legacy_consumers("w")
    assert {cid: (r.subscription, r.pattern) for cid, r in members.items()} == {
        "w_c1": ({"ord.*": 3}, "white_list"), "w_c2": ({"orders": 1}, "static")}
    assert json.loads(zk.zk.get("/consumers/w/ids/w_c1")[0])["pattern"] == "white_list"

    assert zk.get_legacy_offsets("w", [TP0, TP1]) == {}
    zk.commit_legacy_offsets("w", {TP0: 5, TP1: 7})
    zk.commit_legacy_offsets("w", {TP0: 6})
    assert zk.get_legacy_offsets("w", [TP0, TP1]) == {TP0: 6, TP1: 7}

    zk.delete_legacy_consumer("w", "w_c1")
    zk.delete_legacy_consumer("w", "w_c1")  # already gone: nothing to do
    assert zk.get_legacy_consumer_ids("w") == ["w_c2"]
