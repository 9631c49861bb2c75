"""WatchBridge: ZooKeeper notifications become controller events; session loss queues Expire
ahead of everything and the next session RegisterBrokerAndReelect."""

from __future__ import annotations

import threading

import pytest
from kazoo.protocol.states import KazooState, WatchedEvent

from services.common.zk import ZkEvent
from services.controller import watches
from services.controller.service_events import ConfigChangeNotification
from services.controller.state.events import (
    BrokerChange,
    BrokerModifications,
    ControllerChange,
    ElectionTrigger,
    Expire,
    IsrChangeNotification,
    PartitionModifications,
    Reelect,
    RegisterBrokerAndReelect,
    ReplicaLeaderElection,
    TopicChange,
    TopicDeletion,
)
from services.devcluster.proc import wait_until


@pytest.mark.parametrize(
    ("kind", "event_type", "path", "expected"),
    [
        ("controller", "CREATED", "/controller", ControllerChange()),
        ("controller", "DELETED", "/controller", Reelect()),
        ("broker_change", "CHILD", "/brokers/ids", BrokerChange()),
        ("broker_modification", "CHANGED", "/brokers/ids/3", BrokerModifications(3)),
        ("topic_change", "CHILD", "/brokers/topics", TopicChange()),
        ("partition_modifications", "CHANGED", "/brokers/topics/orders", PartitionModifications("orders")),
        ("topic_deletion", "CHILD", "/admin/delete_topics", TopicDeletion()),
        ("isr_change", "CHILD", "/isr_change_notification", IsrChangeNotification()),
        ("config_change", "CHILD", "/config/changes", ConfigChangeNotification()),
        ("topic_change", "NONE", None, None),
    ],
)
def test_notifications_map_to_events(kind, event_type, path, expected):
    assert watches.controller_event_for(ZkEvent(kind, event_type, path)) == expected


def test_a_preferred_election_request_is_a_zookeeper_triggered_election():
    event = watches.controller_event_for(ZkEvent("preferred_replica_election", "CREATED", "/admin/x"))
    assert isinstance(event, ReplicaLeaderElection)
    assert event.partitions is None and event.trigger == ElectionTrigger.ZK_TRIGGERED


class RecordingEvents:
    def __init__(self) -> None:
        self.log: list[tuple[str, object]] = []
        self.lock = threading.Lock()

    def put(self, event, timeout_s=None):
        with self.lock:
            self.log.append(("put", event))

    def clear_and_put(self, event):
        with self.lock:
            self.log.append(("clear_and_put", event))


def test_watches_and_session_states_reach_the_event_queue():
    events = RecordingEvents()
    bridge = watches.WatchBridge(events)
    bridge.start()
    try:
        watch = bridge.watch(watches.BROKER_CHANGE)
        assert watch is bridge.watch(watches.BROKER_CHANGE)  # one callback per kind
        watch(WatchedEvent("CHILD", "CONNECTED", "/brokers/ids"))
        bridge.on_session_state(KazooState.CONNECTED)  # the first session: nothing
        bridge.on_session_state(KazooState.SUSPENDED)
        bridge.on_session_state(KazooState.LOST)
        bridge.on_session_state(KazooState.CONNECTED)
        wait_until(lambda: len(events.log) == 3, 5, message="three events")
    finally:
        bridge.close()
    assert events.log == [
        ("put", BrokerChange()),
        ("clear_and_put", Expire()),
        ("put", RegisterBrokerAndReelect()),
    ]
