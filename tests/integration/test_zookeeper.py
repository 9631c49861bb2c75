"""The ZooKeeper semantics Odradek relies on, checked against the real server: znode kinds, versions,
watches, conditional writes, epoch-fenced transactions, ephemeral cleanup and recursive delete."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import EventType, WatchedEvent

WATCH_TIMEOUT_S = 10.0


@contextlib.contextmanager
def another_client(connect_string: str) -> Iterator[KazooClient]:
    """A second session on the same chroot, stopped and closed however the test ends."""
    client = KazooClient(hosts=connect_string, timeout=10.0)
    client.start(timeout=15.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def recording_watch() -> tuple[threading.Event, list[WatchedEvent], Callable[[WatchedEvent], None]]:
    """A watch callback that records its events and sets an Event the test waits on."""
    fired = threading.Event()
    events: list[WatchedEvent] = []

    def watch(event: WatchedEvent) -> None:
        events.append(event)
        fired.set()

    return fired, events, watch


def test_persistent_znode_data_and_stat_versions(zk_client: KazooClient) -> None:
    created = zk_client.create("/brokers/ids/1", b'{"version":5}', makepath=True)

    data, stat = zk_client.get("/brokers/ids/1")
    assert created == "/brokers/ids/1"
    assert data == b'{"version":5}'
    assert stat.version == 0
    assert stat.ephemeralOwner == 0

    zk_client.set("/brokers/ids/1", b"{}")
    assert zk_client.get("/brokers/ids/1")[1].version == 1
    assert zk_client.get_children("/brokers/ids") == ["1"]
    with pytest.raises(NodeExistsError):
        zk_client.create("/brokers/ids/1", b"again")


def test_ephemeral_znode_is_owned_by_the_session(zk_client: KazooClient) -> None:
    zk_client.create("/controller", b'{"brokerid":1}', ephemeral=True)

    stat = zk_client.exists("/controller")
    assert stat is not None
    assert stat.ephemeralOwner == zk_client.client_id[0]
    assert stat.czxid > 0  # Kafka uses the registration's czxid as the broker epoch


def test_sequential_znodes_get_increasing_ten_digit_suffixes(zk_client: KazooClient) -> None:
    zk_client.ensure_path("/isr_change_notification")

    first = zk_client.create("/isr_change_notification/isr_change_", b"a", sequence=True)
    second = zk_client.create("/isr_change_notification/isr_change_", b"b", sequence=True)
    ephemeral = zk_client.create("/isr_change_notification/member_", ephemeral=True, sequence=True)

    assert first == "/isr_change_notification/isr_change_0000000000"
    assert second == "/isr_change_notification/isr_change_0000000001"
    assert ephemeral == "/isr_change_notification/member_0000000002"
    assert sorted(zk_client.get_children("/isr_change_notification")) == [
        "isr_change_0000000000",
        "isr_change_0000000001",
        "member_0000000002",
    ]


def test_data_watch_fires_once_on_change(zk_client: KazooClient) -> None:
    zk_client.create("/config/topics/t", b"{}", makepath=True)
    fired, events, watch = recording_watch()
    zk_client.get("/config/topics/t", watch=watch)

    zk_client.set("/config/topics/t", b'{"config":{}}')

    assert fired.wait(WATCH_TIMEOUT_S), "data watch did not fire"
    assert [(e.type, e.path) for e in events] == [(EventType.CHANGED, "/config/topics/t")]


def test_children_watch_fires_on_new_child(zk_client: KazooClient) -> None:
    zk_client.ensure_path("/admin/delete_topics")
    fired, events, watch = recording_watch()
    assert zk_client.get_children("/admin/delete_topics", watch=watch) == []

    zk_client.create("/admin/delete_topics/orders")

    assert fired.wait(WATCH_TIMEOUT_S), "children watch did not fire"
    assert [(e.type, e.path) for e in events] == [(EventType.CHILD, "/admin/delete_topics")]


def test_conditional_set_with_a_stale_version_fails(zk_client: KazooClient) -> None:
    path = "/brokers/topics/t/partitions/0/state"
    zk_client.create(path, json.dumps({"leader": 1, "isr": [1, 2]}).encode(), makepath=True)
    stat = zk_client.set(path, json.dumps({"leader": 1, "isr": [1]}).encode(), version=0)
    assert stat.version == 1

    with pytest.raises(BadVersionError):
        zk_client.set(path, json.dumps({"leader": 2, "isr": [2]}).encode(), version=0)

    data, stat = zk_client.get(path)
    assert json.loads(data) == {"leader": 1, "isr": [1]}
    assert stat.version == 1


def test_transaction_fenced_by_controller_epoch_version_fails_atomically(zk_client: KazooClient) -> None:
    state = "/brokers/topics/t/partitions/0/state"
    zk_client.create("/controller_epoch", b"1")
    zk_client.create(state, b'{"leader":1,"controller_epoch":1}', makepath=True)
    epoch_version = zk_client.exists("/controller_epoch").version

    txn = zk_client.transaction()
    txn.check("/controller_epoch", epoch_version)
    txn.set_data(state, b'{"leader":2,"controller_epoch":1}', version=0)
    checked, written = txn.commit()
    assert checked is True
    assert written.version == 1

    zk_client.set("/controller_epoch", b"2")  # a newer controller takes over
    stale = zk_client.transaction()
    stale.check("/controller_epoch", epoch_version)
    stale.set_data(state, b'{"leader":3,"controller_epoch":1}')
    stale.create("/brokers/topics/t/partitions/1/state", b"{}")
    results = stale.commit()

    assert isinstance(results[0], BadVersionError)
    # ZooKeeper does not run the operations after the failed one and answers them RuntimeInconsistency.
    assert all(isinstance(result, RuntimeInconsistency) for result in results[1:])
    assert zk_client.get(state)[0] == b'{"leader":2,"controller_epoch":1}'
    assert zk_client.exists("/brokers/topics/t/partitions/1/state") is None


def test_ephemeral_znode_disappears_when_its_session_closes(
    zookeeper, zk_chroot: str, zk_client: KazooClient
) -> None:
    with another_client(zookeeper.connect_string + zk_chroot) as broker:
        broker.create("/brokers/ids/7", b"{}", ephemeral=True, makepath=True)
        fired, events, watch = recording_watch()
        assert zk_client.exists("/brokers/ids/7", watch=watch) is not None

        broker.stop()

        assert fired.wait(WATCH_TIMEOUT_S), "deletion watch did not fire"
    assert [(e.type, e.path) for e in events] == [(EventType.DELETED, "/brokers/ids/7")]
    assert zk_client.exists("/brokers/ids/7") is None
    assert zk_client.get_children("/brokers/ids") == []


def test_recursive_delete_removes_the_whole_subtree(zk_client: KazooClient) -> None:
    zk_client.ensure_path("/consumers/g/ids/c1")
    zk_client.create("/consumers/g/offsets/t/0", b"42", makepath=True)
    with pytest.raises(NotEmptyError):
        zk_client.delete("/consumers/g")

    zk_client.delete("/consumers/g", recursive=True)

    assert zk_client.exists("/consumers/g") is None
    assert zk_client.get_children("/consumers") == []
    with pytest.raises(NoNodeError):
        zk_client.get("/consumers/g/offsets/t/0")
