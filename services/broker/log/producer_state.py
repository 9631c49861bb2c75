"""Producer state of one partition (Kafka 2.8's ProducerStateManager) and when its snapshots are taken.

For every producer id seen in the log it keeps the epoch, the metadata of its last 5 data batches
(sequence range, offset range, max timestamp), the coordinator epoch of the last transaction
marker and the first offset of the transaction in progress. Everything comes from batch headers;
only a control batch's one record is decoded (for the marker's coordinator epoch), and control
batches never come from producers.

Checks of a batch with a producer id, in Kafka 2.8's order (`ProducerAppendInfo`):

    duplicate   (producer appends only) same epoch as the producer's and the same first and last
                sequence as one of its 5 cached batches: the append writes nothing and answers
                with that batch's offsets; other batches of the append are not looked at
    epoch       older than the producer's: INVALID_PRODUCER_EPOCH (47); replication only warns
    sequence    (producer appends only) a new epoch must start at sequence 0, unless the producer
                is unknown; with the same epoch the first sequence must follow the last one
                (last + 1, or 0 after 2^31 - 1), unless the producer is unknown (then any
                sequence is taken: Kafka 2.8 never answers UNKNOWN_PRODUCER_ID): otherwise
                OUT_OF_ORDER_SEQUENCE_NUMBER (45)
    transaction non-transactional data while a transaction is open: INVALID_TXN_STATE (48); a
                marker with an older coordinator epoch: TRANSACTION_COORDINATOR_FENCED (52);
                replication only warns

State changes only when the append was written (`update`), which returns the transactions its
markers completed (`CompletedTxn`: the log indexes the aborted ones, see `txn_index`). The open
transactions' first offsets give the partition's first unstable offset (Kafka's
`firstUnstableOffset`), from which the log's last stable offset follows. Producers idle for
`producer_id_expiration_ms` (by their last batch's timestamp) without an open transaction are
dropped by `remove_expired_producers`.

The snapshot file format, and the entry each producer has, are `producer_snapshot`'s. Snapshots are
written (to `<name>.tmp`, fsynced, renamed) on roll, on clean close and after loading, only by logs
that ever held a producer id: before the first batch with a producer id goes into a log with no
snapshot, a snapshot at that batch's offset is written, so a log without any snapshot file holds no
producer batch. The two newest snapshots are kept, and the newest one at or below the recovery point.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from services.broker.log.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from services.broker.log.files import (
    atomic_write,
    producer_snapshot_file,
    unlink_if_exists,
)
from services.broker.log.producer_snapshot import (
    MAX_SEQUENCE,
    BatchMetadata,
    ProducerStateEntry,
    encode_snapshot,
    list_snapshot_files,
    read_snapshot,
)
from services.broker.log.validation import AppendOrigin
from services.common.records import decode_batch, parse_control_record
from services.common.records.batch import CONTROL_MASK, NO_PRODUCER_EPOCH, NO_SEQUENCE, TRANSACTIONAL_MASK

logger = logging.getLogger(__name__)

SNAPSHOTS_TO_KEEP = 2
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 604800000  # transactional.id.expiration.ms, as Kafka 2.8 uses
DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600000

_CLIENT = AppendOrigin.CLIENT
_REPLICATION = AppendOrigin.REPLICATION


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: its data's first offset (the marker's own offset when
    none was seen) to the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


class ProducerAppendInfo:
    """The update one append makes to one producer, checked batch by batch before anything is written."""

    __slots__ = ("topic_partition", "producer_id", "origin", "current_epoch", "current_last_seq",
                 "producer_epoch", "batches", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "completed_txns")

    def __init__(self, topic_partition, producer_id: int, current: ProducerStateEntry | None,
                 origin: AppendOrigin) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.origin = origin
        self.batches: list[BatchMetadata] = []
        current = current or ProducerStateEntry(producer_id)
        self.current_epoch = self.producer_epoch = current.producer_epoch
        self.current_last_seq = current.last_seq
        self.coordinator_epoch = current.coordinator_epoch
        self.last_timestamp = current.last_timestamp
        self.current_txn_first_offset = current.current_txn_first_offset
        self.completed_txns: list[CompletedTxn] = []

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        self._check_epoch(epoch, first_offset)
        if self.origin is _CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self._set_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, last_offset - first_offset, timestamp))
        self.last_timestamp = timestamp
        if self.current_txn_first_offset is None:
            if is_transactional:
                self.current_txn_first_offset = first_offset
        elif not is_transactional:
            self._refuse(InvalidTxnStateError(
                f"expected a transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in {self.topic_partition}"))

    def append_end_txn_marker(self, epoch: int, coordinator_epoch: int, offset: int, timestamp: int,
                              commit: bool = True) -> None:
        self._check_epoch(epoch, offset)
        if self.coordinator_epoch > coordinator_epoch:
            self._refuse(TransactionCoordinatorFencedError(
                f"coordinator epoch {coordinator_epoch} of the marker of producer {self.producer_id} at "
                f"offset {offset} in {self.topic_partition} is older than {self.coordinator_epoch}"))
        self._set_epoch(epoch)
        first = offset if self.current_txn_first_offset is None else self.current_txn_first_offset
        self.completed_txns.append(CompletedTxn(self.producer_id, first, offset, not commit))
        self.current_txn_first_offset = None
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = timestamp

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:  # a new epoch starts with no batches
            self.batches.clear()
            self.producer_epoch = epoch

    def _check_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.producer_epoch:
            self._refuse(InvalidProducerEpochError(
                f"epoch {epoch} of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is older than the last seen epoch {self.producer_epoch}"))

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        if epoch != self.producer_epoch:
            if first_seq != 0 and self.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"sequence {first_seq} for the new epoch {epoch} of producer {self.producer_id} at "
                    f"offset {offset} in {self.topic_partition} is not 0 (current epoch "
                    f"{self.producer_epoch})")
            return
        last_seq = (self.batches[-1].last_seq if self.batches
                    else self.current_last_seq if epoch == self.current_epoch else NO_SEQUENCE)
        if self.current_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition}: {first_seq} (incoming), {last_seq} (last appended)")

    def _refuse(self, error: Exception) -> None:
        if self.origin is _REPLICATION:
            logger.warning("%s", error)
        else:
            raise error


# from `analyze`: pending updates per producer, and the batch a duplicate repeats (nothing is written)
PendingProducers = tuple[dict[int, ProducerAppendInfo], BatchMetadata | None]


class ProducerStateManager:
    """The producers of one partition log; not thread-safe (the Log's lock guards it)."""

    def __init__(self, topic_partition, log_dir: str,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS, *,
                 list_snapshots: bool = True) -> None:
        """Knows the snapshot files in `log_dir`, or none without `list_snapshots` (a new log's)."""
        self.topic_partition = topic_partition
        self.log_dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # the first offset of the earliest open transaction, or None: read without the Log's lock
        self.first_unstable_offset: int | None = None
        self._snapshots: dict[int, str] = list_snapshot_files(log_dir) if list_snapshots else {}

    # -- state ---------------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self._producers)

    def last_stable_offsets(self, completed: list[CompletedTxn]) -> list[int]:
        """The last stable offset once each of `completed` (an append's, as `update` returned them)
        ended, in marker order: the first offset of the earliest transaction of another producer
        still open then (the later ones of the append included), or the offset after its marker
        (Kafka's `lastStableOffset(completedTxn)` before each `completeTxn`)."""
        result = []
        for i, txn in enumerate(completed):
            pid = txn.producer_id
            others = [first for other, first in self._ongoing.items() if other != pid]
            others += [later.first_offset for later in completed[i + 1:] if later.producer_id != pid]
            result.append(min(others) if others else txn.last_offset + 1)
        return result

    def state(self) -> dict[int, tuple]:
        """Every producer's state as plain tuples (for comparisons)."""
        return {pid: entry.as_tuple() for pid, entry in sorted(self._producers.items())}

    # -- appends -------------------------------------------------------------------------------

    def analyze(self, view, batches, first_offset: int | None, origin: AppendOrigin,
                append_time_ms: int | None = None) -> PendingProducers | None:
        """Checks the batches with a producer id of an append; None when there is none.

        `batches` is [(position in view, header)]; offsets are assigned from `first_offset` as a
        leader does, or taken from the headers when it is None. `append_time_ms` replaces the
        batches' max timestamps (LogAppendTime). Raises the first error found.
        """
        infos: dict[int, ProducerAppendInfo] = {}
        offset = first_offset
        check_duplicates = origin is _CLIENT
        producers = self._producers
        for pos, header in batches:
            _, _, _, _, _, attributes, delta, _, max_timestamp, producer_id, epoch, first_seq, _ = header
            base = header.base_offset if first_offset is None else offset
            last = base + delta
            offset = last + 1
            if producer_id < 0:
                continue
            last_seq = NO_SEQUENCE if first_seq == NO_SEQUENCE else (first_seq + delta) & MAX_SEQUENCE
            if check_duplicates:
                entry = producers.get(producer_id)
                if entry is not None and entry.producer_epoch == epoch:
                    duplicate = entry.find_batch(first_seq, last_seq)
                    if duplicate is not None:
                        return infos, duplicate
            is_control = attributes & CONTROL_MASK
            marker = control_marker(view, pos) if is_control else None
            if marker is None and is_control:  # emptied by the cleaner
                continue
            timestamp = max_timestamp if append_time_ms is None else append_time_ms
            info = infos.get(producer_id)
            if info is None:
                info = infos[producer_id] = self.prepare_update(producer_id, origin)
            if marker is not None:
                info.append_end_txn_marker(epoch, marker.coordinator_epoch, base, timestamp, marker.commit)
            else:
                info.append_data_batch(epoch, first_seq, last_seq, timestamp, base, last,
                                       attributes & TRANSACTIONAL_MASK)
        return (infos, None) if infos else None

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        return ProducerAppendInfo(self.topic_partition, producer_id, self._producers.get(producer_id), origin)

    def before_write(self, offset: int) -> None:
        """Called before producer batches are written at `offset`: see the module doc."""
        if not self._snapshots:
            self.take_snapshot(offset, force=True)

    def update(self, pending: PendingProducers,
               before_visible: Callable[[list[CompletedTxn]], None] | None = None) -> list[CompletedTxn]:
        """Applies checked updates once their batches were written; returns the transactions
        their markers completed, in marker order. `before_visible(completed)` runs before the first
        unstable offset moves past them (readers take it without the Log's lock): the Log indexes
        the aborted ones there, so a read_committed fetch that reads past an aborted transaction
        always finds it in the transaction index (Kafka updates the index before `completeTxn`)."""
        producers = self._producers
        ongoing = self._ongoing
        completed: list[CompletedTxn] = []
        for producer_id, info in pending[0].items():
            entry = producers.get(producer_id)
            if entry is None:
                entry = producers[producer_id] = ProducerStateEntry(producer_id)
            if entry.producer_epoch != info.producer_epoch:
                entry.batches.clear()
                entry.producer_epoch = info.producer_epoch
            entry.batches.extend(info.batches)
            entry.coordinator_epoch = info.coordinator_epoch
            entry.last_timestamp = info.last_timestamp
            entry.current_txn_first_offset = info.current_txn_first_offset
            if info.current_txn_first_offset is None:
                ongoing.pop(producer_id, None)
            else:
                ongoing[producer_id] = info.current_txn_first_offset
            completed.extend(info.completed_txns)
        if len(completed) > 1:
            completed.sort(key=_marker_offset)
        if completed and before_visible is not None:
            before_visible(completed)
        self._update_first_unstable_offset()
        return completed

    def replay(self, view, pos: int, header) -> list[CompletedTxn]:
        """Applies one batch read back from the log (as replication does: nothing is refused);
        returns the transactions it completed."""
        pending = self.analyze(view, ((pos, header),), None, _REPLICATION)
        return [] if pending is None else self.update(pending)

    def _set_producers(self, producers: dict[int, ProducerStateEntry]) -> None:
        self._producers = producers
        self._ongoing = {pid: e.current_txn_first_offset for pid, e in producers.items()
                         if e.current_txn_first_offset is not None}
        self._update_first_unstable_offset()

    def _update_first_unstable_offset(self) -> None:
        ongoing = self._ongoing
        self.first_unstable_offset = min(ongoing.values()) if ongoing else None

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        expired = [pid for pid, entry in self._producers.items() if self._is_expired(entry, now_ms)]
        for producer_id in expired:
            del self._producers[producer_id]
        return expired

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    # -- snapshots -----------------------------------------------------------------------------

    @property
    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def take_snapshot(self, offset: int, force: bool = False) -> bool:
        """Writes the state as of `offset` unless a snapshot at or after it exists, or (without
        `force`) the log never held a producer id. Returns whether it wrote."""
        latest = self.latest_snapshot_offset
        if latest is not None and offset <= latest:
            return False
        if latest is None and not self._producers and not force:
            return False
        path = producer_snapshot_file(self.log_dir, offset)
        try:
            atomic_write(path, encode_snapshot(self._producers.values()))
        except OSError as e:
            raise KafkaStorageError(f"error writing the producer snapshot {path}: {e}") from e
        self._snapshots[offset] = path
        return True

    def retain_snapshots(self, recovery_point: int) -> None:
        """Keeps the two newest snapshots and the newest at or below `recovery_point`."""
        offsets = sorted(self._snapshots)
        if len(offsets) <= SNAPSHOTS_TO_KEEP:
            return
        keep = set(offsets[-SNAPSHOTS_TO_KEEP:])
        below = [o for o in offsets if o <= recovery_point]
        if below:
            keep.add(below[-1])
        for offset in offsets:
            if offset not in keep:
                self._delete_snapshot(offset)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Deletes the snapshots older than the newest one at or below the new log start offset
        (state is kept, as Kafka 2.8 keeps it, until the producers expire)."""
        below = sorted(o for o in self._snapshots if o <= log_start_offset)
        for offset in below[:-1]:
            self._delete_snapshot(offset)

    def truncate_and_reload(self, max_offset: int, now_ms: int) -> int | None:
        """Drops snapshots above `max_offset` and loads the newest valid one left (corrupt ones
        are deleted); producers expired by `now_ms` are left out. Returns its offset, or None
        (state empty) when there is none."""
        for offset in [o for o in self._snapshots if o > max_offset]:
            self._delete_snapshot(offset)
        self._set_producers({})
        for offset in sorted(self._snapshots, reverse=True):
            path = self._snapshots[offset]
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, OSError) as e:
                logger.warning("%s: ignoring producer snapshot %s: %s", self.topic_partition, path, e)
                self._delete_snapshot(offset)
                continue
            self._set_producers({e.producer_id: e for e in entries if not self._is_expired(e, now_ms)})
            return offset
        return None

    def truncate_fully(self) -> None:
        """Forgets every producer and deletes every snapshot (the log restarts empty)."""
        self._set_producers({})
        for offset in list(self._snapshots):
            self._delete_snapshot(offset)

    def update_dir(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self._snapshots = {o: producer_snapshot_file(log_dir, o) for o in self._snapshots}

    def _delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            unlink_if_exists(path)


def _marker_offset(txn: CompletedTxn) -> int:
    return txn.last_offset


def control_marker(view, pos: int):
    """The COMMIT/ABORT record of the control batch at `pos`, or None if the batch is empty."""
    _, records = decode_batch(view, pos, check_crc=False)
    if not records:
        return None
    return parse_control_record(records[0].key, records[0].value)
