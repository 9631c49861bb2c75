"""docs/metrics.md lists exactly the families the services export, and every metric the Grafana
dashboard (deploy/grafana/odradek.json) queries is one of them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from services.broker.fetch_session_cache import FetchSessionCache
from services.broker.metrics import BrokerMetrics
from services.broker.replication.quota import ReplicationQuota
from services.broker.topic_stats import BrokerTopicStats
from services.common.clock import ManualClock
from services.common.request_metrics import RequestMetrics
from services.controller.metrics import ControllerMetrics
from services.coordinator.group import GroupConfig, GroupCoordinator, ManualScheduler
from services.coordinator.lag import LogEndOffsets
from services.coordinator.metrics import CoordinatorMetrics
from services.gateway.metrics import GatewayMetrics

ROOT = Path(__file__).resolve().parents[2]
DOC_ROW = re.compile(r"^\| `(odradek_[a-z0-9_]+)` \| ([CGH]) \|", re.MULTILINE)
METRIC_NAME = re.compile(r"\bodradek_[a-z0-9_]+\b")
TYPE_LETTERS = {"counter": "C", "gauge": "G", "histogram": "H"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def documented() -> dict[str, str]:
    """Name → type letter, from the tables of docs/metrics.md."""
    return dict(DOC_ROW.findall((ROOT / "docs" / "metrics.md").read_text()))


def exposed_name(family) -> str:
    return family.name + "_total" if family.type == "counter" else family.name


def exported() -> dict[str, str]:
    """Name → type letter of every family the collectors of all four services export."""
    registry = CollectorRegistry()
    partition = SimpleNamespace(topic="t", partition=0, leader_id=1, is_leader=True, isr=(1,), replicas=(1,),
                                log=SimpleNamespace(size_in_bytes=1, num_segments=1, log_end_offset=1,
                                                    log_start_offset=0))
    purgatory = SimpleNamespace(watched=0, delayed=0)
    manager = SimpleNamespace(partitions=lambda: [partition], fetch_purgatory=purgatory, produce_purgatory=purgatory,
                              isr_manager=None, delayed_fetch_expired=0, delayed_produce_expired=0,
                              topic_stats=BrokerTopicStats(), fetch_sessions=FetchSessionCache(),
                              leader_quota=ReplicationQuota(), follower_quota=ReplicationQuota(),
                              offline_partition_keys=list,
                              log_manager=SimpleNamespace(log_dirs=["/d"], offline_log_dirs=dict))
    BrokerMetrics(SimpleNamespace(broker_id=1, replica_manager=manager), registry)
    view = SimpleNamespace(active=True, offline_partition_count=0, preferred_replica_imbalance_count=0,
                           global_topic_count=1, global_partition_count=1, topics_to_delete_count=0,
                           failed_zk_writes=0)
    ControllerMetrics(1001, lambda: view, lambda: 0, registry)
    clock = ManualClock()
    groups = GroupCoordinator(GroupConfig(), clock, ManualScheduler(clock), SimpleNamespace())
    CoordinatorMetrics(2001, groups, LogEndOffsets(lambda tps: {}, clock), registry)
    RequestMetrics(registry)
    families = list(registry.collect()) + list(GatewayMetrics().registry.collect())
    return {exposed_name(f): TYPE_LETTERS[f.type] for f in families}


def sample_names(families: dict[str, str]) -> set[str]:
    names = set()
    for name, kind in families.items():
        names.update([name + suffix for suffix in HISTOGRAM_SUFFIXES] if kind == "H" else [name])
    return names


def dashboard() -> dict:
    return json.loads((ROOT / "deploy" / "grafana" / "odradek.json").read_text())


def test_the_docs_list_exactly_the_exported_families_with_their_types():
    assert documented() == exported()


def test_every_metric_a_dashboard_panel_queries_is_exported():
    known = sample_names(exported())
    panels = [p for p in dashboard()["panels"] if p["type"] != "row"]
    used = {name for panel in panels for target in panel["targets"] for name in METRIC_NAME.findall(target["expr"])}
    assert used and used <= known, sorted(used - known)


def test_the_dashboard_picks_its_prometheus_datasource():
    board = dashboard()
    assert board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"]), panel["title"]


def test_the_dashboard_covers_each_area():
    queried = " ".join(t["expr"] for p in dashboard()["panels"] if p["type"] != "row" for t in p["targets"])
    for name in ("odradek_request_total", "odradek_request_seconds_bucket", "odradek_broker_topic_bytes_in_total",
                 "odradek_broker_topic_bytes_out_total", "odradek_broker_topic_messages_in_total",
                 "odradek_replica_manager_under_replicated_partitions", "odradek_controller_offline_partitions_count",
                 "odradek_controller_active_controller_count", "odradek_replica_manager_isr_shrinks_total",
                 "odradek_replica_manager_isr_expands_total", "odradek_replica_manager_leader_count",
                 "odradek_replica_manager_partition_count", "odradek_log_size",
                 "odradek_delayed_operation_purgatory_purgatory_size", "odradek_coordinator_num_groups",
                 "odradek_coordinator_num_members", "odradek_consumer_group_lag", "odradek_gateway_requests_total",
                 "odradek_gateway_request_seconds_bucket"):
        assert name in queried, name
