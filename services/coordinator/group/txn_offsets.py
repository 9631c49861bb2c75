"""The offsets of open transactions (KIP-98), as Kafka 2.8's GroupMetadata keeps them.

Offsets committed in a transaction (TxnOffsetCommit) are pending for its producer id in
`GroupMetadata.pending_txn_offsets`: OffsetFetch does not show them, and answers
UNSTABLE_OFFSET_COMMIT for their partitions when asked for stable offsets. Each keeps the log
offset of its record once written. When the transaction's marker is written to the partition
(`complete`), COMMIT makes each the committed offset unless the committed offset's record is
later in the log (a newer plain commit or a later transaction: log offsets order them), and
ABORT drops them. Replay does the same with the transactional batches (`replay_txn_offset`) and
markers it reads, so a transaction still open at the end of the log stays pending. Deleting or
expiring a group's offsets leaves pending ones alone.
"""

from __future__ import annotations

from services.coordinator.group.api import CommittedOffset, TopicPartition
from services.coordinator.group.group import GroupMetadata, PendingTxnOffset


def replay_txn_offset(
    group: GroupMetadata, producer_id: int, tp: TopicPartition, offset: CommittedOffset | None, position: int | None
) -> None:
    """A record of a transactional batch: pending for `producer_id` (a tombstone removes it)."""
    pending = group.pending_txn_offsets.setdefault(producer_id, {})
    if offset is None:
        pending.pop(tp, None)
    else:
        pending[tp] = PendingTxnOffset(offset, position)
    if not pending:
        del group.pending_txn_offsets[producer_id]


def prepare(group: GroupMetadata, producer_id: int, offsets: dict[TopicPartition, CommittedOffset]) -> None:
    """TxnOffsetCommit is writing `offsets`: pending for `producer_id`, without a position yet."""
    group.pending_txn_offsets.setdefault(producer_id, {}).update({tp: PendingTxnOffset(o) for tp, o in offsets.items()})


def on_txn_offset_written(
    group: GroupMetadata, producer_id: int, tp: TopicPartition, offset: CommittedOffset, position: int | None,
    ok: bool,
) -> None:  # fmt: skip
    """The write of a pending offset finished: it keeps its record's position, or is dropped if it failed."""
    pending = group.pending_txn_offsets.get(producer_id, {})
    entry = pending.get(tp)
    if entry is None or entry.offset != offset or entry.position is not None:
        return  # completed, aborted or committed again meanwhile
    if ok:
        pending[tp] = PendingTxnOffset(offset, position)
        return
    del pending[tp]
    if not pending:
        del group.pending_txn_offsets[producer_id]


def complete(group: GroupMetadata, producer_id: int, commit: bool) -> None:
    """The marker of `producer_id` was written: apply (COMMIT) or drop (ABORT) its offsets."""
    pending = group.pending_txn_offsets.pop(producer_id, {})
    if not commit:
        return
    for tp, entry in pending.items():
        if entry.position is None:
            continue  # its write had not finished when the marker was: it is not before the marker
        current = group.offset_positions.get(tp)
        if tp not in group.offsets or current is None or current < entry.position:
            group.offsets[tp] = entry.offset
            group.offset_positions[tp] = entry.position
