"""ISR changes made by partition leaders: AlterIsr requests and ISR change notifications.

AlterIsr (Kafka 2.8's processAlterIsr): the request is refused as a whole with
STALE_BROKER_EPOCH unless the broker is registered with that epoch. Per partition: unknown is
UNKNOWN_TOPIC_OR_PARTITION; an older leader epoch is FENCED_LEADER_EPOCH; a state equal to the
current one (ignoring the version) is answered with the current state; a version other than the
state znode's is INVALID_UPDATE_VERSION; otherwise the state znode is set (conditional on that
version; the leader epoch is not bumped) and answered with the new version. Every live broker
then gets UpdateMetadata for the requested partitions.

ISR change notifications (`/isr_change_notification/isr_change_<seq>`, written by leaders that
changed a state znode themselves): the service reads the named partitions' state znodes; they
replace the cached leadership and every live broker gets UpdateMetadata for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.controller.state.context import ControllerContext
from services.controller.state.effects import Outcome, UpdatePartitionState
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from services.controller.state.records import PartitionLeadershipChanged
from services.controller.state.request_batch import update_metadata_effects


@dataclass
class AlterIsrOutcome(Outcome):
    """`results`: partition -> the state now in force, or the KafkaError to answer."""

    results: dict[TopicPartition, LeaderAndIsr | KafkaError] = field(default_factory=dict)


def alter_isr(
    context: ControllerContext,
    broker_id: int,
    broker_epoch: int,
    isrs_to_alter: Mapping[TopicPartition, LeaderAndIsr],
) -> AlterIsrOutcome:
    """`isrs_to_alter` maps each partition to (requesting broker, its leader epoch, the new ISR,
    the state znode version it last saw)."""
    cached = context.broker_epoch(broker_id)
    if cached is None:
        raise KafkaError(
            f"Ignoring AlterIsr due to unknown broker {broker_id}", error=Errors.STALE_BROKER_EPOCH
        )
    if cached != broker_epoch:
        raise KafkaError(
            f"Ignoring AlterIsr due to stale broker epoch {broker_epoch} for broker {broker_id}",
            error=Errors.STALE_BROKER_EPOCH,
        )
    outcome = AlterIsrOutcome()
    for partition, requested in sorted(isrs_to_alter.items()):
        leadership = context.partition_leadership(partition)
        if leadership is None:
            outcome.results[partition] = KafkaError(error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        current = leadership.leader_and_isr
        if requested.leader_epoch < current.leader_epoch:
            outcome.results[partition] = KafkaError(error=Errors.FENCED_LEADER_EPOCH)
        elif requested.equals_ignore_zk_version(current):
            outcome.results[partition] = current
        elif requested.zk_version != current.zk_version:
            outcome.results[partition] = KafkaError(
                f"Failed to update ISR to {requested} for partition {partition}, bad ZK version.",
                error=Errors.INVALID_UPDATE_VERSION,
            )
        else:
            written = requested.with_zk_version(current.zk_version + 1)
            outcome.effects.append(
                UpdatePartitionState(
                    partition, written, context.epoch, context.epoch_zk_version, current.zk_version
                )
            )
            outcome.apply(
                context,
                PartitionLeadershipChanged(partition, LeaderIsrAndControllerEpoch(written, context.epoch)),
            )
            outcome.results[partition] = written
    outcome.effects.extend(
        update_metadata_effects(context, context.live_or_shutting_down_broker_ids, sorted(isrs_to_alter))
    )
    return outcome


def isr_change_notification(
    context: ControllerContext, leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
) -> Outcome:
    """Take the re-read state znodes of partitions whose ISR a leader changed and announce them."""
    outcome = Outcome()
    for partition, leadership in sorted(leaderships.items()):
        outcome.apply(context, PartitionLeadershipChanged(partition, leadership))
    if leaderships:
        outcome.effects.extend(
            update_metadata_effects(context, context.live_or_shutting_down_broker_ids, sorted(leaderships))
        )
    return outcome
