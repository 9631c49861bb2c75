"""Controlled shutdown of a broker (Kafka 2.8's KafkaController.doControlledShutdown).

The broker must be registered (else BROKER_NOT_AVAILABLE) and ask with its current broker
epoch or a newer one (an older one is STALE_BROKER_EPOCH; -1 skips the check). It is marked as
shutting down; then, among its partitions with more than one replica, with leadership, and not
queued for deletion:
  - those it leads move leadership by the controlled-shutdown election (first replica of the
    assignment in the ISR and not shutting down; the ISR loses every shutting-down broker);
  - those it follows get a StopReplica (keeping the log) and lose it from their ISR
    (its replica goes OfflineReplica).
The answer is the set of partitions it still leads (with more than one replica); the broker
retries until that is empty. Partitions with a single replica stay with it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from services.common.errors import Errors, KafkaError
from services.common.shared_types import UNKNOWN_BROKER_EPOCH
from services.common.topic_partition import TopicPartition
from services.controller.state.context import ControllerContext
from services.controller.state.effects import Outcome
from services.controller.state.election import ControlledShutdownPartitionLeaderElectionStrategy
from services.controller.state.model import PartitionAndReplica
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.records import BrokerShuttingDown
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.request_batch import RequestBatch
from services.controller.state.states import PartitionState, ReplicaState

logger = logging.getLogger(__name__)


@dataclass
class ControlledShutdownOutcome(Outcome):
    remaining_partitions: list[TopicPartition] = field(default_factory=list)


def check_controlled_shutdown_request(context: ControllerContext, broker_id: int, broker_epoch: int) -> None:
    """Raise STALE_BROKER_EPOCH or BROKER_NOT_AVAILABLE as Kafka does."""
    cached = context.broker_epoch(broker_id)
    if broker_epoch != UNKNOWN_BROKER_EPOCH and cached is not None and broker_epoch < cached:
        raise KafkaError(
            f"Received controlled shutdown request from an old broker epoch {broker_epoch} for broker "
            f"{broker_id}. Current broker epoch is {cached}.",
            error=Errors.STALE_BROKER_EPOCH,
        )
    if broker_id not in context.live_or_shutting_down_broker_ids:
        raise KafkaError(f"Broker id {broker_id} does not exist.", error=Errors.BROKER_NOT_AVAILABLE)


def controlled_shutdown(
    context: ControllerContext,
    partition_state_machine: PartitionStateMachine,
    replica_state_machine: ReplicaStateMachine,
    broker_id: int,
    broker_epoch: int,
) -> ControlledShutdownOutcome:
    check_controlled_shutdown_request(context, broker_id, broker_epoch)
    logger.info("Shutting down broker %s", broker_id)
    outcome = ControlledShutdownOutcome()
    outcome.apply(context, BrokerShuttingDown(broker_id))
    led: list[TopicPartition] = []
    followed: list[TopicPartition] = []
    for partition in context.partitions_on_broker(broker_id):
        leadership = context.partition_leadership(partition)
        if (
            len(context.partition_replica_assignment(partition)) <= 1
            or leadership is None
            or context.is_topic_queued_for_deletion(partition.topic)
        ):
            continue
        (led if leadership.leader_and_isr.leader == broker_id else followed).append(partition)
    outcome.extend(
        partition_state_machine.handle_state_changes(
            led, PartitionState.ONLINE_PARTITION, ControlledShutdownPartitionLeaderElectionStrategy()
        )
    )
    batch = RequestBatch(context)
    for partition in followed:
        batch.add_stop_replica([broker_id], partition, delete_partition=False)
    outcome.effects.extend(batch.build())
    replicas = [PartitionAndReplica(p, broker_id) for p in followed]
    outcome.extend(replica_state_machine.handle_state_changes(replicas, ReplicaState.OFFLINE_REPLICA))
    outcome.remaining_partitions = context.partition_leaders_on_broker(broker_id)
    return outcome
