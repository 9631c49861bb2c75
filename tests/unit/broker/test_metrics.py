"""The broker's Prometheus metrics, read from the replica manager at scrape time."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from services.broker.fetch_session_cache import INITIAL_EPOCH, FetchSessionCache
from services.broker.metrics import BrokerMetrics
from services.broker.replica_fetch import FetchPartition
from services.broker.replication.quota import ReplicationQuota
from services.broker.topic_stats import BrokerTopicStats


def partition(topic: str, index: int, leader_id: int, is_leader: bool, isr: tuple[int, ...],
              replicas: tuple[int, ...]):
    log = SimpleNamespace(size_in_bytes=1000 + index, num_segments=index + 1, log_end_offset=50 + index,
                          log_start_offset=index)
    return SimpleNamespace(topic=topic, partition=index, leader_id=leader_id, is_leader=is_leader, isr=isr,
                           replicas=replicas, log=log)


def purgatory(watched: int, delayed: int):
    return SimpleNamespace(watched=watched, delayed=delayed)


def scrape(manager) -> tuple[str, BrokerMetrics]:
    registry = CollectorRegistry()
    metrics = BrokerMetrics(SimpleNamespace(broker_id=1, replica_manager=manager), registry)
    return generate_latest(registry).decode(), metrics


def fake_manager(stats: BrokerTopicStats, hosted):
    return SimpleNamespace(
        partitions=lambda: hosted, fetch_purgatory=purgatory(9, 4), produce_purgatory=purgatory(3, 2),
        isr_manager=SimpleNamespace(shrinks=5, expands=6), delayed_fetch_expired=7, delayed_produce_expired=8,
        topic_stats=stats, fetch_sessions=FetchSessionCache(),
        leader_quota=ReplicationQuota(), follower_quota=ReplicationQuota(), offline_partition_keys=lambda: [("c", 0)],
        log_manager=SimpleNamespace(log_dirs=["/d1", "/d2"], offline_log_dirs=lambda: {"/d2": "No space left"}))


def test_gauges_and_counters_carry_the_broker_id():
    hosted = [partition("a", 0, 1, True, (1, 2, 3), (1, 2, 3)), partition("a", 1, 1, True, (1,), (1, 2, 3)),
              partition("b", 0, 2, False, (2, 1), (2, 1)), partition("b", 1, -1, False, (), (3, 1))]
    text, metrics = scrape(fake_manager(BrokerTopicStats(), hosted))
    for line in ('odradek_replica_manager_partition_count{broker="1"} 4.0',
                 'odradek_log_manager_offline_log_directory_count{broker="1"} 1.0',
                 'odradek_log_manager_log_directory_offline{broker="1",log_directory="/d1"} 0.0',
                 'odradek_log_manager_log_directory_offline{broker="1",log_directory="/d2"} 1.0',
                 'odradek_replica_manager_offline_replica_count{broker="1"} 1.0',
                 'odradek_replica_manager_leader_count{broker="1"} 2.0',
                 'odradek_replica_manager_under_replicated_partitions{broker="1"} 1.0',
                 'odradek_replica_manager_offline_partitions{broker="1"} 1.0',
                 'odradek_replica_manager_isr_shrinks_total{broker="1"} 5.0',
                 'odradek_replica_manager_isr_expands_total{broker="1"} 6.0',
                 'odradek_delayed_operation_purgatory_purgatory_size{broker="1",delayed_operation="Fetch"} 9.0',
                 'odradek_delayed_operation_purgatory_num_delayed_operations{broker="1",delayed_operation="Fetch"} 4.0',
                 'odradek_delayed_operation_purgatory_purgatory_size{broker="1",delayed_operation="Produce"} 3.0',
                 'odradek_delayed_operation_purgatory_num_delayed_operations'
                 '{broker="1",delayed_operation="Produce"} 2.0',
                 'odradek_delayed_operation_expires_total{broker="1",delayed_operation="Fetch"} 7.0',
                 'odradek_delayed_operation_expires_total{broker="1",delayed_operation="Produce"} 8.0',
                 'odradek_log_size{broker="1",partition="1",topic="a"} 1001.0',
                 'odradek_log_num_log_segments{broker="1",partition="1",topic="b"} 2.0',
                 'odradek_log_log_end_offset{broker="1",partition="0",topic="b"} 50.0',
                 'odradek_log_log_start_offset{broker="1",partition="1",topic="a"} 1.0'):
        assert line in text, line
    metrics.close()


def test_topic_traffic_per_topic_and_for_all_topics():
    stats = BrokerTopicStats()
    stats.appended("a", 100, 3)
    stats.appended("b", 50, 1)
    stats.appended("a", 10, 1)
    stats.fetched({"a": 70, "b": 5}, {"a": 7, "b": 1}, from_follower=False)
    stats.fetched({"a": 110}, {"a": 11}, from_follower=True)
    stats.replicated(40)
    stats.remove("b")  # deleted: gone from the per-topic families, kept in the totals
    text, metrics = scrape(fake_manager(stats, []))
    for line in ('odradek_broker_topic_bytes_in_total{broker="1",topic="a"} 110.0',
                 'odradek_broker_topic_messages_in_total{broker="1",topic="a"} 4.0',
                 'odradek_broker_topic_bytes_out_total{broker="1",topic="a"} 70.0',
                 'odradek_broker_topic_messages_out_total{broker="1",topic="a"} 7.0',
                 'odradek_broker_topic_all_topics_messages_out_total{broker="1"} 8.0',
                 'odradek_broker_topic_all_topics_bytes_in_total{broker="1"} 160.0',
                 'odradek_broker_topic_all_topics_messages_in_total{broker="1"} 5.0',
                 'odradek_broker_topic_all_topics_bytes_out_total{broker="1"} 75.0',
                 'odradek_broker_topic_replication_bytes_out_total{broker="1"} 110.0',
                 'odradek_broker_topic_replication_bytes_in_total{broker="1"} 40.0'):
        assert line in text, line
    assert 'topic="b"' not in text
    metrics.close()


def test_closing_unregisters():
    registry = CollectorRegistry()
    metrics = BrokerMetrics(SimpleNamespace(broker_id=1, replica_manager=fake_manager(BrokerTopicStats(), [])),
                            registry)
    metrics.close()
    assert generate_latest(registry).decode() == ""


def test_fetch_session_cache_figures():
    manager = fake_manager(BrokerTopicStats(), [])
    cache = manager.fetch_sessions = FetchSessionCache(max_slots=1)
    partitions = [FetchPartition("a", i, 0, 1024) for i in range(3)]
    session = cache.new_context(2, 0, INITIAL_EPOCH, partitions, [], False, 0).session
    cache.new_context(2, session.id, 1, [], [], False, 0)
    cache.new_context(3, 0, INITIAL_EPOCH, partitions + [FetchPartition("a", 3, 0, 1024)], [], False, 0)
    text, metrics = scrape(manager)
    for line in ('odradek_fetch_session_cache_num_incremental_fetch_sessions{broker="1"} 1.0',
                 'odradek_fetch_session_cache_num_incremental_fetch_partitions_cached{broker="1"} 4.0',
                 'odradek_fetch_session_cache_incremental_fetch_session_evictions_total{broker="1"} 1.0',
                 'odradek_fetch_session_cache_full_fetches_total{broker="1"} 2.0',
                 'odradek_fetch_session_cache_incremental_fetches_total{broker="1"} 1.0'):
        assert line in text, line
    metrics.close()
