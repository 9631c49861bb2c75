"""`ControllerView`: an immutable picture of the controller that the event thread publishes after
every event, so RPC threads and metric scrapes read it without touching the controller's state
(the context belongs to the event thread alone).

It holds whether this instance is the active controller, the active controller's id, the epoch,
the live brokers, and Kafka's controller gauges (offline partitions, preferred replica imbalance,
topic and partition counts, topics queued for deletion), and how many ZooKeeper writes this
controller has given up on since it started (`failed_zk_writes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.common.shared_types import BrokerInfo
from services.controller.state.context import ControllerContext

NO_CONTROLLER = -1


@dataclass(frozen=True, slots=True)
class ControllerView:
    controller_id: int
    cluster_id: str = ""
    active: bool = False
    active_controller_id: int = NO_CONTROLLER
    epoch: int = 0
    brokers: tuple[BrokerInfo, ...] = ()
    offline_partition_count: int = 0
    preferred_replica_imbalance_count: int = 0
    global_topic_count: int = 0
    global_partition_count: int = 0
    topics_to_delete_count: int = 0
    failed_zk_writes: int = 0


def view_of(
    controller_id: int,
    cluster_id: str,
    active: bool,
    active_controller_id: int,
    context: ControllerContext,
    failed_zk_writes: int = 0,
) -> ControllerView:
    """The view of a controller; a standby's gauges are all 0, as Kafka resets them on resignation
    (the count of failed writes is kept)."""
    if not active:
        return ControllerView(
            controller_id, cluster_id, False, active_controller_id, failed_zk_writes=failed_zk_writes
        )
    return ControllerView(
        controller_id=controller_id,
        cluster_id=cluster_id,
        active=True,
        active_controller_id=controller_id,
        epoch=context.epoch,
        brokers=context.live_or_shutting_down_brokers(),
        offline_partition_count=context.offline_partition_count(),
        preferred_replica_imbalance_count=context.preferred_replica_imbalance_count(),
        global_topic_count=len(context.all_topics),
        global_partition_count=context.global_partition_count(),
        topics_to_delete_count=len(context.topics_to_be_deleted),
        failed_zk_writes=failed_zk_writes,
    )
