"""`TxnOffsetCommands`: TxnOffsetCommit and the completion of transactions by their markers,
the core's transactional offset commands (the pending offsets themselves: txn_offsets.py).

TxnOffsetCommit checks the group as Kafka 2.8 does (a member id and a generation are enforced
only when given; an unknown group is created Empty, as for a consumer that only stores offsets),
refuses metadata over offset.metadata.max.bytes (OFFSET_METADATA_TOO_LARGE), and writes the rest
as one transactional batch of the transaction's producer id and epoch; they are pending for that
producer until the transaction's marker is written. A marker for a partition of
`__consumer_offsets` is accepted only by its owner (`check_txn_marker`), and once the marker is
written `handle_txn_completion` commits or aborts the producer's offsets there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.common.clock import Clock
from services.common.errors import Errors
from services.coordinator.group.api import CommittedOffset, TopicPartition
from services.coordinator.group.effects import Outcome, TxnOffsetsWritten, TxnProducer
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.manager import GroupMetadataManager, offset_store_error
from services.coordinator.group.txn_offsets import on_txn_offset_written, prepare


class TxnOffsetCommands:
    """Mixed into GroupCoordinatorCore, whose state it works on."""

    manager: GroupMetadataManager
    _clock: Clock
    active: bool
    check: Callable[..., int]
    _stamped: Callable[[dict[TopicPartition, CommittedOffset]], dict[TopicPartition, CommittedOffset]]
    offset_commit_records: Callable[..., tuple[dict[TopicPartition, CommittedOffset], tuple, list]]

    def handle_txn_commit_offsets(
        self, group_id: str, transaction: TxnProducer, member_id: str, group_instance_id: str | None,
        generation_id: int, offsets: dict[TopicPartition, CommittedOffset], reply: Any,
    ) -> Outcome:  # fmt: skip
        """TxnOffsetCommit; answers `reply` with {partition: error code} once written."""
        fx = Outcome()
        offsets = self._stamped(offsets)
        error = self.check(group_id, allow_empty_id=True)
        group = None
        if error == Errors.NONE:
            error, group = self.manager.get_group(group_id, create=True)
        if error == Errors.NONE and group is not None:
            error = _txn_commit_error(group, member_id, group_instance_id or None, generation_id)
        if error != Errors.NONE or group is None:
            fx.respond(reply, {tp: error for tp in offsets})
            return fx
        valid, too_large, batch = self.offset_commit_records(group.group_id, offsets)
        if not valid:
            fx.respond(reply, {tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in offsets})
            return fx
        prepare(group, transaction.producer_id, valid)
        written = TxnOffsetsWritten(group.group_id, transaction.producer_id, valid, too_large, reply)
        if not self.manager.append(group.group_id, batch, written, fx, transaction):
            self.on_txn_offsets_written(group, written, Errors.NOT_COORDINATOR, None, fx)
        return fx

    def on_txn_offsets_written(
        self, group: GroupMetadata | None, written: TxnOffsetsWritten, error_code: int, first_offset: int | None,
        fx: Outcome,
    ) -> None:  # fmt: skip
        ok = error_code == Errors.NONE
        if group is not None and not group.is_(GroupState.DEAD):
            for index, (tp, offset) in enumerate(written.offsets.items()):
                position = None if first_offset is None else first_offset + index
                on_txn_offset_written(group, written.producer_id, tp, offset, position, ok)
        error = Errors.NONE if ok else offset_store_error(error_code)
        result = {tp: error for tp in written.offsets}
        result.update({tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in written.too_large})
        fx.respond(written.reply, result)

    def check_txn_marker(self, partition: int) -> Outcome:
        """Whether a marker for `partition` of `__consumer_offsets` may be written through this
        coordinator: `result` NONE, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR."""
        fx = Outcome()
        fx.result = self.manager.partition_status(partition) if self.active else Errors.NOT_COORDINATOR
        return fx

    def handle_txn_completion(self, partition: int, producer_id: int, commit: bool) -> Outcome:
        """The marker of `producer_id` was written to `partition`: complete its offsets there.
        `result`: NONE, or NOT_COORDINATOR when the partition is no longer owned (its next owner
        may have loaded it before the marker was written, so the marker must be sent again)."""
        fx = Outcome()
        fx.result = self.manager.partition_status(partition) if self.active else Errors.NOT_COORDINATOR
        if fx.result == Errors.NONE:
            self.manager.complete_txn(partition, producer_id, commit)
        elif fx.result == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            fx.result = Errors.NOT_COORDINATOR
        return fx


def _txn_commit_error(group: GroupMetadata, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
    """Kafka 2.8's checks of a TxnOffsetCommit: a member id and a generation only when given."""
    if group.is_(GroupState.DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if group.is_static_member_fenced(member_id, group_instance_id):
        return Errors.FENCED_INSTANCE_ID
    if member_id != "" and not group.has(member_id):
        return Errors.UNKNOWN_MEMBER_ID
    if generation_id >= 0 and generation_id != group.generation_id:
        return Errors.ILLEGAL_GENERATION
    return Errors.NONE
