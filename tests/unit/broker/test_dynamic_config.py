"""A broker's dynamic configs: precedence (per-broker > cluster default > static > default), the live
default log config, describe with sources and synonyms, refused sets, and the change listener
rereading the announced entities (over a fake kazoo and the real `OdradekZkClient`)."""

from __future__ import annotations

from types import SimpleNamespace

from services.broker.config import BrokerConfig
from services.broker.dynamic_config import ConfigChangeListener, DynamicBrokerConfig
from services.broker.replication.fetcher import FetcherConfig, ReplicaFetcherManager
from services.broker.server import fetcher_config
from services.common.config import ConfigType
from services.common.dynamic_broker_configs import (
    DEFAULT_CONFIG_SOURCE,
    DYNAMIC_BROKER_CONFIG_SOURCE,
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE,
    STATIC_BROKER_CONFIG_SOURCE,
)
from services.common.zk import OdradekZkClient
from tests.unit.zk.fake_kazoo import FakeKazoo

STATIC = {"broker.id": 1, "zookeeper.connect": "zk", "log.retention.ms": "500000"}


def dynamic_config():
    applied = []
    return DynamicBrokerConfig(1, BrokerConfig.load(STATIC, env={}), applied.append), applied


def test_the_dynamic_keys_are_declared_by_the_broker_with_the_same_types():
    settings = BrokerConfig.settings()
    assert {key: settings[key].kind for key in DYNAMIC_BROKER_CONFIGS} == dict(DYNAMIC_BROKER_CONFIGS)
    assert DYNAMIC_BROKER_CONFIGS["log.cleanup.policy"] is ConfigType.LIST


def test_per_broker_beats_cluster_default_beats_static_and_deleting_brings_the_static_value_back():
    dynamic, applied = dynamic_config()
    assert dynamic.update({"log.retention.ms": "60000"}, {})
    assert applied[-1].retention_ms == 60000
    assert dynamic.update({"log.retention.ms": "60000"}, {"log.retention.ms": "30000"})
    assert applied[-1].retention_ms == 30000 and dynamic.current.log_retention_ms == 30000
    assert dynamic.update({}, {})
    assert applied[-1].retention_ms == 500000
    count = len(applied)
    assert dynamic.update({}, {})
    assert len(applied) == count  # nothing changed, nothing reapplied


def test_static_keys_in_zookeeper_are_ignored_and_a_refused_set_keeps_the_previous_config():
    dynamic, applied = dynamic_config()
    assert dynamic.update({"num.partitions": "9"}, {"log.segment.bytes": "2097152"})
    assert dynamic.current.num_partitions == 1 and applied[-1].segment_bytes == 2097152
    assert not dynamic.update({}, {"log.segment.bytes": "1"})  # below log.segment.bytes' minimum
    assert dynamic.current.log_segment_bytes == 2097152


def test_describe_gives_effective_values_with_sources_and_synonyms():
    dynamic, _ = dynamic_config()
    dynamic.update({"log.retention.ms": "60000", "log.segment.bytes": "2097152"}, {"log.retention.ms": "30000"})
    entries = dynamic.describe("1", include_synonyms=True)
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source, retention.read_only) == ("30000", DYNAMIC_BROKER_CONFIG_SOURCE, False)
    assert [(s.value, s.source) for s in retention.synonyms] == [
        ("30000", DYNAMIC_BROKER_CONFIG_SOURCE), ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE),
        ("500000", STATIC_BROKER_CONFIG_SOURCE)]
    assert (entries["log.segment.bytes"].value, entries["log.segment.bytes"].source) == (
        "2097152", DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE)
    assert (entries["broker.id"].value, entries["broker.id"].source, entries["broker.id"].read_only) == (
        "1", STATIC_BROKER_CONFIG_SOURCE, True)
    assert (entries["num.partitions"].value, entries["num.partitions"].source) == ("1", DEFAULT_CONFIG_SOURCE)
    defaults = dynamic.describe("", include_synonyms=True)
    assert {k: (e.value, e.source) for k, e in defaults.items()} == {
        "log.retention.ms": ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE),
        "log.segment.bytes": ("2097152", DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE)}
    assert set(dynamic.describe("1", keys=("log.retention.ms",))) == {"log.retention.ms"}


def test_the_change_listener_rereads_own_and_default_entities_and_topics():
    kazoo = FakeKazoo()
    zk = OdradekZkClient(kazoo)
    dynamic, applied = dynamic_config()
    topics = []
    listener = ConfigChangeListener(kazoo, zk, dynamic, topics.append)
    zk.set_broker_config("2", {"log.retention.ms": "1"})  # another broker's: not ours
    listener.process_changes()
    assert applied == []
    zk.set_broker_config("<default>", {"log.retention.ms": "60000"})
    zk.set_topic_config("t", {"retention.ms": "5"})
    listener.process_changes()
    assert applied[-1].retention_ms == 60000 and topics == ["t"]
    zk.set_broker_config("1", {"log.retention.ms": "30000"})
    listener.process_changes()
    listener.process_changes()  # seen notifications are not processed again
    assert [c.retention_ms for c in applied] == [60000, 30000] and topics == ["t"]


def test_replica_fetch_settings_reach_the_fetchers_from_their_next_fetch():
    seen = []
    dynamic = DynamicBrokerConfig(1, BrokerConfig.load(STATIC, env={}), on_config=seen.append)
    assert dynamic.update({"replica.fetch.max.bytes": "65536"}, {"replica.fetch.wait.max.ms": "100"})
    assert fetcher_config(seen[-1]) == FetcherConfig(replica_id=1, max_wait_ms=100, min_bytes=1,
                                                     max_bytes=10485760, partition_max_bytes=65536,
                                                     backoff_ms=1000, request_timeout_ms=30000)
    manager = ReplicaFetcherManager(None, fetcher_config(BrokerConfig.load(STATIC, env={})), None, None)
    running = SimpleNamespace(config=manager.config)
    manager._threads[2] = running
    manager.reconfigure(fetcher_config(seen[-1]))
    assert manager.config.partition_max_bytes == 65536 and running.config is manager.config


def test_seen_notifications_older_than_fifteen_minutes_are_purged():
    kazoo = FakeKazoo()
    zk = OdradekZkClient(kazoo)
    dynamic, _ = dynamic_config()
    listener = ConfigChangeListener(kazoo, zk, dynamic, lambda _topic: None)
    for entity in ("2", "3", "4"):
        zk.set_broker_config(entity, {"log.retention.ms": "1"})
    old, recent, _ = zk.get_config_change_notifications()
    kazoo.ctimes[f"/config/changes/{old}"] -= 16 * 60 * 1000
    kazoo.ctimes[f"/config/changes/{recent}"] -= 60 * 1000
    listener.process_changes()
    assert zk.get_config_change_notifications() == [recent, _]
