"""Log dir failures (KIP-112): a broker whose log dir went offline announces it in ZooKeeper;
the controller sends it LeaderAndIsr for every replica it holds, and the partitions it answers
KAFKA_STORAGE_ERROR for have their replica there marked offline (until the broker registers
again): leaders are elected among the other ISR members and the ISRs shrink, as for a dead broker
but replica by replica."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from services.common.errors import Errors
from services.common.topic_partition import TopicPartition
from services.controller.state.context import ControllerContext
from services.controller.state.effects import Outcome
from services.controller.state.model import PartitionAndReplica
from services.controller.state.records import ReplicasOnOfflineDirsAdded
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.states import ReplicaState

logger = logging.getLogger(__name__)


def on_broker_log_dir_failure(
    context: ControllerContext, replica_state_machine: ReplicaStateMachine, broker_ids: Iterable[int]
) -> Outcome:
    """LeaderAndIsr for every replica of each live broker named, so that its answers say which
    replicas are offline."""
    live = sorted(set(broker_ids) & context.live_or_shutting_down_broker_ids)
    return replica_state_machine.handle_state_changes(context.replicas_on_brokers(live), ReplicaState.ONLINE_REPLICA)


def on_storage_errors(
    context: ControllerContext,
    broker_id: int,
    partition_errors: Mapping[TopicPartition, int],
    replicas_become_offline: Callable[[list[PartitionAndReplica]], Outcome],
) -> Outcome:
    """The replicas a LeaderAndIsr answer of `broker_id` gave KAFKA_STORAGE_ERROR for, not known
    offline yet, go offline."""
    offline = {TopicPartition(*p) for p, code in partition_errors.items() if code == Errors.KAFKA_STORAGE_ERROR}
    new_offline = offline - context.replicas_on_offline_dirs(broker_id)
    outcome = Outcome()
    if not new_offline or broker_id not in context.live_or_shutting_down_broker_ids:
        return outcome
    logger.info(
        "Broker %d holds %d replicas in offline log dirs, e.g. %s", broker_id, len(new_offline), min(new_offline)
    )
    outcome.apply(context, ReplicasOnOfflineDirsAdded(broker_id, frozenset(new_offline)))
    known = set(context.all_partitions())
    replicas = [PartitionAndReplica(p, broker_id) for p in sorted(new_offline) if p in known]
    return outcome.extend(replicas_become_offline(replicas))
