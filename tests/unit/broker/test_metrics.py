"""The broker's Prometheus metrics, read from the replica manager at scrape time."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from services.broker.metrics import BrokerMetrics


def partition(leader_id: int, is_leader: bool, isr: tuple[int, ...], replicas: tuple[int, ...]):
    return SimpleNamespace(leader_id=leader_id, is_leader=is_leader, isr=isr, replicas=replicas)


def test_gauges_and_counters_carry_the_broker_id():
    hosted = [partition(1, True, (1, 2, 3), (1, 2, 3)), partition(1, True, (1,), (1, 2, 3)),
              partition(2, False, (2, 1), (2, 1)), partition(-1, False, (), (3, 1))]
    manager = SimpleNamespace(
        partitions=lambda: hosted, fetch_purgatory=SimpleNamespace(delayed=4),
        produce_purgatory=SimpleNamespace(delayed=2), isr_manager=SimpleNamespace(shrinks=5, expands=6),
        delayed_fetch_expired=7, delayed_produce_expired=8)
    registry = CollectorRegistry()
    metrics = BrokerMetrics(SimpleNamespace(broker_id=1, replica_manager=manager), registry)
    text = generate_latest(registry).decode()
    for line in ('odradek_replica_manager_partition_count{broker="1"} 4.0',
                 'odradek_replica_manager_leader_count{broker="1"} 2.0',
                 'odradek_replica_manager_under_replicated_partitions{broker="1"} 1.0',
                 'odradek_replica_manager_offline_partitions{broker="1"} 1.0',
                 'odradek_purgatory_delayed_fetches{broker="1"} 4.0',
                 'odradek_purgatory_delayed_produces{broker="1"} 2.0',
                 'odradek_replica_manager_isr_changes_total{broker="1",change="shrink"} 5.0',
                 'odradek_replica_manager_isr_changes_total{broker="1",change="expand"} 6.0',
                 'odradek_purgatory_expired_total{broker="1",operation="fetch"} 7.0',
                 'odradek_purgatory_expired_total{broker="1",operation="produce"} 8.0'):
        assert line in text, line
    metrics.close()
    assert generate_latest(registry).decode() == ""
