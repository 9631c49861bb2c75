"""The rebalance listener's place in a rebalance, on a connector whose ZooKeeper layer, session
and fetchers are in-memory stand-ins."""

from __future__ import annotations

import pytest

from services.clients.zk_consumer import connector as connector_module
from services.clients.zk_consumer.connector import ZookeeperConsumerConnector
from services.clients.zk_consumer.errors import ConsumerRebalanceFailedError, MessageStreamsExistError
from services.clients.zk_consumer.listener import ConsumerRebalanceListener
from services.clients.zk_consumer.topic_count import ConsumerThreadId
from services.common.zk.consumers import ConsumerRegistration
from tests.unit.clients.zk_consumer.fake_zk import FakeZk


class FakeSession:
    def __init__(self, *args, **kwargs):
        pass

    def add_listener(self, listener):
        pass

    def start(self, timeout=None):
        pass

    def stop(self):
        pass

    def close(self):
        pass


class FakeFetchers:
    def __init__(self, log: list):
        self.log = log

    def start_connections(self, infos, client):
        self.log.append(("fetchers started", sorted(str(info.tp) for info in infos)))

    def stop_connections(self):
        self.log.append(("fetchers stopped",))


class Recording(ConsumerRebalanceListener):
    def __init__(self, log: list, zk: FakeZk, failures: int = 0):
        self.log, self.zk, self.failures = log, zk, failures

    def before_releasing_partitions(self, partition_ownership):
        self.log.append(("releasing", partition_ownership, sorted(map(str, self.zk.owners))))

    def before_starting_fetchers(self, consumer_id, global_partition_assignment):
        self.log.append(("starting", consumer_id, global_partition_assignment, sorted(map(str, self.zk.owners))))
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the application refused")


@pytest.fixture
def make(monkeypatch):
    monkeypatch.setattr(connector_module, "zk_client", FakeSession)
    made: list[ZookeeperConsumerConnector] = []

    def build(zk: FakeZk, log: list, **config) -> ZookeeperConsumerConnector:
        connector = ZookeeperConsumerConnector({
            "zookeeper.connect": "zk:2181", "group.id": "g", "consumer.id": "b", "auto.commit.enable": False,
            "rebalance.backoff.ms": 0, **config})
        connector.zk = zk
        connector._offsets = connector._offset_storage()
        connector.fetcher = FakeFetchers(log)
        connector._broker_client = lambda brokers: None
        made.append(connector)
        return connector

    yield build
    for connector in made:
        connector.shutdown()


def test_the_listener_sees_the_old_ownership_then_the_groups_assignment_before_fetching(make):
    zk = FakeZk({"t": 3}, {"g_a": ConsumerRegistration({"t": 1})})
    log: list = []
    connector = make(zk, log, **{"partition.assignment.strategy": "roundrobin"})
    connector.set_consumer_rebalance_listener(Recording(log, zk))
    connector.create_message_streams({"t": 1})
    a, b = ConsumerThreadId("g_a", 0), ConsumerThreadId("g_b", 0)
    assert log == [  # round-robin: t-0, t-1, t-2 in hash order, dealt to g_a-0, g_b-0, g_a-0
        ("fetchers stopped",),
        ("releasing", {}, []),
        ("starting", "g_b", {"t": {0: a, 1: b, 2: a}}, ["t-1"]),
        ("fetchers started", ["t-1"]),
    ]
    log.clear()
    del zk.members["g_a"]
    connector._synced_rebalance()  # what the member list's watch leads to
    assert log[1] == ("releasing", {"t": {1}}, ["t-1"])
    assert log[2] == ("starting", "g_b", {"t": {0: b, 1: b, 2: b}}, ["t-0", "t-1", "t-2"])
    assert log[3] == ("fetchers started", ["t-0", "t-1", "t-2"])


def test_a_listener_error_fails_the_attempt_which_releases_and_is_retried(make):
    zk = FakeZk({"t": 2}, {})
    log: list = []
    connector = make(zk, log)
    connector.set_consumer_rebalance_listener(Recording(log, zk, failures=1))
    connector.create_message_streams({"t": 1})
    steps = [entry[0] for entry in log]
    assert steps == ["fetchers stopped", "releasing", "starting", "fetchers stopped", "fetchers stopped",
                     "releasing", "starting", "fetchers started"]
    assert log[5] == ("releasing", {}, [])  # the failed attempt's claims were released
    assert connector.rebalance_count == 1 and set(zk.owners.values()) == {"g_b-0"}


def test_a_listener_failing_every_attempt_fails_the_rebalance_with_its_error(make):
    zk = FakeZk({"t": 1}, {})
    log: list = []
    connector = make(zk, log, **{"rebalance.max.retries": 2})
    connector.set_consumer_rebalance_listener(Recording(log, zk, failures=2))
    with pytest.raises(ConsumerRebalanceFailedError, match="after 2 retries: the application refused"):
        connector.create_message_streams({"t": 1})
    assert zk.owners == {}


def test_the_listener_is_set_only_before_the_streams(make):
    zk = FakeZk({"t": 1}, {})
    connector = make(zk, [])
    connector.create_message_streams({"t": 1})
    with pytest.raises(MessageStreamsExistError):
        connector.set_consumer_rebalance_listener(ConsumerRebalanceListener())
