"""EventScheduler (keyed delayed events) and the controller's Prometheus collector."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from services.common.clock import ManualClock
from services.common.scheduler import ManualScheduler
from services.controller.metrics import ControllerMetrics
from services.controller.scheduler import EventScheduler
from services.controller.state.events import AutoPreferredReplicaLeaderElection, Reelect
from services.controller.view import ControllerView, view_of
from services.devcluster.proc import wait_until
from tests.unit.controller.cluster import make_context, online_topic

LATER_S = 60.0


def test_one_pending_event_per_key_and_cancel():
    queued = []
    scheduler = EventScheduler(queued.append)
    try:
        scheduler.schedule("a", LATER_S, Reelect())
        scheduler.schedule("a", 0, AutoPreferredReplicaLeaderElection())  # replaces the first
        scheduler.schedule("b", LATER_S, Reelect())
        scheduler.cancel("b")
        wait_until(lambda: queued, 5, message="the scheduled event")
        assert queued == [AutoPreferredReplicaLeaderElection()]
        assert not scheduler.is_scheduled("a") and not scheduler.is_scheduled("b")
    finally:
        scheduler.close()
    scheduler.schedule("c", 0, Reelect())
    assert not scheduler.is_scheduled("c")


def test_events_are_queued_when_due_on_an_injected_scheduler():
    manual = ManualScheduler(ManualClock())
    queued = []
    scheduler = EventScheduler(queued.append, manual)
    scheduler.schedule("a", LATER_S, Reelect())
    scheduler.schedule("a", 1, AutoPreferredReplicaLeaderElection())  # replaces the first
    scheduler.schedule("b", 2, Reelect())
    scheduler.cancel("b")
    scheduler.schedule("c", 3, Reelect())
    assert scheduler.is_scheduled("a") and not scheduler.is_scheduled("b")
    assert manual.advance(999) == 0 and queued == []
    manual.advance(LATER_S * 1000)
    assert queued == [AutoPreferredReplicaLeaderElection(), Reelect()]
    assert not scheduler.is_scheduled("a") and not scheduler.is_scheduled("c")


def test_metrics_read_the_published_view():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: (1, 2), 1: (2, 1)}, leaders={1: 1})
    view = view_of(1001, "cid", True, 1001, context, failed_zk_writes=2)
    assert (view.global_topic_count, view.global_partition_count, view.preferred_replica_imbalance_count) == (
        1,
        2,
        1,
    )
    registry = CollectorRegistry()
    current = {"view": view}
    metrics = ControllerMetrics(1001, lambda: current["view"], lambda: 7, registry)
    labels = {"controller": "1001"}
    assert registry.get_sample_value("odradek_controller_active_controller_count", labels) == 1
    assert registry.get_sample_value("odradek_controller_global_partition_count", labels) == 2
    assert registry.get_sample_value("odradek_controller_preferred_replica_imbalance_count", labels) == 1
    assert registry.get_sample_value("odradek_controller_event_queue_size", labels) == 7
    assert registry.get_sample_value("odradek_controller_failed_zk_writes_total", labels) == 2
    current["view"] = ControllerView(1001)
    assert registry.get_sample_value("odradek_controller_active_controller_count", labels) == 0
    assert registry.get_sample_value("odradek_controller_global_partition_count", labels) == 0
    metrics.close()
    assert registry.get_sample_value("odradek_controller_active_controller_count", labels) is None
