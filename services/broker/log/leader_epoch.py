"""`LeaderEpochFileCache`: the (leader epoch -> first offset of that epoch) history of one partition.

Kept in memory and mirrored to the partition's `leader-epoch-checkpoint` (format in
`checkpoints`). Appends stamp each batch with its leader epoch and the log calls `assign` for each
new epoch before it writes the batch; followers use `end_offset_for` (OffsetsForLeaderEpoch) to
find where their log diverges from the leader's; truncation and log start offset moves trim the
history. Entries are strictly increasing in both epoch and start offset. Thread-safe.

When the file is written: truncations and log start offset moves write it at once. A new entry
(`assign`) is written by `flush_entries_below`, which the log calls before it moves its recovery
point past the entry's start, when it closes, and from a background task soon after a batch
follows the entry: an entry above the recovery point is rebuilt from the batches' headers by the
recovery after a crash, and one at or above the log end offset is dropped at load anyway, so
writing it at once buys nothing. A broker made leader of thousands of new partitions then writes
no file for any of them until they get data, and then not on the path of an append.
"""

from __future__ import annotations

import logging
import threading

from services.broker.log.checkpoints import EpochEntry, LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

logger = logging.getLogger(__name__)


class LeaderEpochFileCache:
    def __init__(self, topic_partition, checkpoint: LeaderEpochCheckpointFile, *, read_checkpoint: bool = True) -> None:
        """Starts from the checkpoint's entries, or with none without `read_checkpoint` (a new log's)."""
        self.topic_partition = topic_partition
        self.checkpoint = checkpoint
        self._lock = threading.RLock()
        self._epochs: list[EpochEntry] = []
        self.latest_epoch: int | None = None  # kept in step with _epochs; read on every append
        # the lowest start offset of an entry not in the file yet (None when all are); read without
        # the lock after every append, as latest_epoch is
        self.unwritten_from: int | None = None
        for entry in checkpoint.read() if read_checkpoint else ():
            self._assign(entry)
        self._changed()

    # -- reads ---------------------------------------------------------------------------------

    @property
    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._epochs)

    @property
    def latest_entry(self) -> EpochEntry | None:
        epochs = self._epochs
        return epochs[-1] if epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        epochs = self._epochs
        return epochs[0] if epochs else None

    @property
    def previous_epoch(self) -> int | None:
        epochs = self._epochs
        return epochs[-2].epoch if len(epochs) >= 2 else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset`, if any."""
        with self._lock:
            found = None
            for entry in self._epochs:
                if entry.start_offset > offset:
                    break
                found = entry.epoch
            return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch, as Kafka 2.8's LeaderEpochFileCache.endOffsetFor.

        The latest epoch ends at the log end offset; an older epoch ends where the next higher one
        starts, reported with the largest known epoch <= the requested one; an unknown or too new
        epoch gives (-1, -1).
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == self._epochs[-1].epoch:
                return requested_epoch, log_end_offset
            floor = None
            for entry in self._epochs:
                if entry.epoch > requested_epoch:
                    if floor is None:
                        return requested_epoch, entry.start_offset
                    return floor.epoch, entry.start_offset
                floor = entry
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

    # -- changes -------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records that `epoch` starts at `start_offset` (a no-op if already known); the file gets
        it from `flush_entries_below`, or with the next truncation."""
        if epoch < 0:
            return
        latest = self._epochs[-1] if self._epochs else None
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return
        with self._lock:
            if self._assign(EpochEntry(epoch, start_offset)):
                unwritten = self.unwritten_from
                self.unwritten_from = start_offset if unwritten is None else min(unwritten, start_offset)
                self._changed()

    def flush_entries_below(self, offset: int) -> bool:
        """Writes the file if an entry starting below `offset` is not in it yet; returns whether
        it wrote."""
        with self._lock:
            unwritten = self.unwritten_from
            if unwritten is None or unwritten >= offset:
                return False
            self._flush()
            return True

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        latest = self._epochs[-1] if self._epochs else None
        if latest is not None and latest.epoch == entry.epoch and entry.start_offset >= latest.start_offset:
            return False
        removed = []
        while self._epochs and (self._epochs[-1].epoch >= entry.epoch
                                or self._epochs[-1].start_offset >= entry.start_offset):
            removed.append(self._epochs.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            logger.warning("%s: new leader epoch entry %s replaced earlier entries %s",
                           self.topic_partition, entry, removed)
        self._epochs.append(entry)
        return True

    def truncate_from_end(self, end_offset: int, flush: bool = True) -> None:
        """Drops entries starting at or after `end_offset` (after the log was truncated there).
        Without `flush` the file keeps them: loading a log does this from the log's own end, which
        every later load does again (an epoch assigned to an empty log is dropped so at every
        start), so rewriting the file of each of thousands of logs at each start gains nothing."""
        with self._lock:
            if end_offset >= 0 and self._epochs and self._epochs[-1].start_offset >= end_offset:
                while self._epochs and self._epochs[-1].start_offset >= end_offset:
                    self._epochs.pop()
                if flush:
                    self._flush()
                self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drops entries wholly below `start_offset`; the epoch holding it now starts there."""
        with self._lock:
            if start_offset < 0:
                return
            removed = None
            dropped = 0
            while self._epochs and self._epochs[0].start_offset <= start_offset:
                removed = self._epochs.pop(0)
                dropped += 1
            if removed is not None:
                self._epochs.insert(0, EpochEntry(removed.epoch, start_offset))
                if dropped > 1 or removed.start_offset != start_offset:  # else: as it was (a log load)
                    self._flush()
                    self._changed()

    def clear_and_flush(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._flush()
            self._changed()

    def clear(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._changed()

    def update_dir(self, new_dir: str) -> None:
        with self._lock:
            self.checkpoint.update_dir(new_dir)

    def writes_held(self) -> threading.RLock:
        """Held (`with cache.writes_held():`) while the log's directory is renamed, so a checkpoint
        write in flight never writes to the old directory and replaces into a gone one."""
        return self._lock

    def _flush(self) -> None:
        self.checkpoint.write(self._epochs)
        self.unwritten_from = None

    def _changed(self) -> None:
        self.latest_epoch = self._epochs[-1].epoch if self._epochs else None
