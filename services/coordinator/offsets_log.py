"""`OffsetsLog`: this coordinator's partitions of one internal topic, read and written through the
brokers: `__consumer_offsets` for the group coordinator, `__transaction_state` (a second instance)
for the transaction coordinator. What follows holds for both.

Writing (`append`, the group coordinator's `GroupStore`). One writer thread takes every append
queued, builds one RecordBatch per partition and sends them with acks=all, one ProduceRequest per
leader broker. Batches are idempotent: each partition is written with the producer id the
ownership map gives it, the partition's ownership epoch as producer epoch, and consecutive
sequence numbers, so a retry is never appended twice, and once a new owner has written with a
higher epoch the brokers refuse the old owner's batches (INVALID_PRODUCER_EPOCH): that is how a
deposed owner is fenced. Such a refusal is answered NOT_COORDINATOR and the partition's groups
are dropped from memory (its reload fails the same way until ZooKeeper shows the new owner); a
write whose outcome is unknown (a timeout) makes the partition reload, which finds the sequence
to continue from. Each caller learns the log offset of its first record.

Transactions (TxnOffsetCommit). An append with a `transaction` (producer id, epoch) is written
alone, as one transactional batch of that producer with base sequence -1 (the brokers take it
from a coordinator without sequence checks); a refusal of its epoch is the transaction's
(INVALID_PRODUCER_EPOCH, PRODUCER_FENCED) and fences nothing here. `write_txn_marker` forwards a
COMMIT or ABORT marker to the partitions' leaders (the brokers' WriteTxnMarkers). Both go through
the writer thread in queue order with the other appends, so the log holds them in the order the
group coordinator asked for them.

Loading (`load`). The new owner replays the partition from its log start up to the high
watermark, then writes a fence record (key version 3, coordinator id; a tombstone, so compaction
drops it) with its own epoch, then replays up to that record. Anything the previous owner wrote
is replayed; anything it tries to write afterwards is refused. Only then are the partition's
groups served. Records of transactional batches go to `replay_txn` and markers to
`replay_marker` when given (else transactional records replay as plain ones and markers are
skipped).

    fence record key:  int16 version = 3, int32 coordinator id;  value: null
"""

from __future__ import annotations

import logging
import queue
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors
from services.common.records.batch import NO_SEQUENCE
from services.common.records.builder import build_batch
from services.common.records.reader import iter_batches, parse_control_record
from services.common.shared_types import TxnMarker
from services.common.zk.coordinators import PartitionOwner

logger = logging.getLogger(__name__)

FENCE_KEY_VERSION = 3
_FENCED = (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED)
_SEQUENCE_WRAP = 0x7FFFFFFF
# a transactional write that failed with one of these may be in the log all the same
_IN_DOUBT = (Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION, Errors.UNKNOWN_SERVER_ERROR,
             Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)

Records = list[tuple[bytes, bytes | None]]
Callback = Callable[..., None]  # callback(error_code, first_offset or None)
Replay = Callable[[bytes, bytes | None, int, int], None]  # key, value, offset, timestamp
ReplayTxn = Callable[[bytes, bytes | None, int, int, int], None]  # ..., producer id
ReplayMarker = Callable[[int, bool, int], None]  # producer id, commit, offset


class LoadError(Exception):
    """Loading a partition failed; the caller retries."""


def fence_key(coordinator_id: int) -> bytes:
    return struct.pack(">hi", FENCE_KEY_VERSION, coordinator_id)


def is_fence_key(key: bytes | None) -> bool:
    return key is not None and len(key) >= 2 and struct.unpack_from(">h", key)[0] == FENCE_KEY_VERSION


@dataclass(frozen=True)
class _TxnAppend:
    partition: int
    records: Records
    callback: Callback
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class _MarkerWrite:
    partitions: list[int]
    marker: TxnMarker
    callback: Callable[[dict[int, int]], None]


@dataclass
class _Writable:
    """A partition this instance may write: its producer identity and next sequence."""

    producer_id: int
    epoch: int
    next_sequence: int


class OffsetsLog:
    def __init__(self, client: LowLevelClient, coordinator_id: int, *, topic: str = "__consumer_offsets",
                 commit_timeout_ms: int = 5000, load_buffer_bytes: int = 5242880,
                 compression: int = 0, on_in_doubt: Callable[[int], None] | None = None) -> None:
        self.client = client
        self.coordinator_id = coordinator_id
        self.topic = topic
        self.commit_timeout_ms = commit_timeout_ms
        self.load_buffer_bytes = load_buffer_bytes
        self.compression = compression
        self.on_in_doubt = on_in_doubt or (lambda partition: None)
        self._writable: dict[int, _Writable] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[int, Records, Callback] | _TxnAppend | _MarkerWrite | None] = queue.Queue()
        self._closed = False
        self._thread = threading.Thread(target=self._write_loop, name=f"{topic}-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ GroupStore

    def append(self, partition: int, records: Records, callback: Callback,
               transaction: tuple[int, int] | None = None) -> None:
        if self._closed:
            callback(Errors.NOT_COORDINATOR, None)
            return
        if transaction is None:
            self._queue.put((partition, list(records), callback))
        else:
            self._queue.put(_TxnAppend(partition, list(records), callback, *transaction))

    def write_txn_marker(self, partitions: list[int], producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int, callback: Callable[[dict[int, int]], None]) -> None:
        marker = TxnMarker(producer_id, producer_epoch, commit, coordinator_epoch)
        if self._closed:
            callback(dict.fromkeys(partitions, Errors.NOT_COORDINATOR))
            return
        self._queue.put(_MarkerWrite(list(partitions), marker, callback))

    def close(self) -> None:
        self._closed = True
        self._queue.put(None)
        self._thread.join(10)

    def release(self, partition: int) -> None:
        """Stops writing `partition` (ownership moved away); queued appends get NOT_COORDINATOR."""
        with self._lock:
            self._writable.pop(partition, None)

    # ------------------------------------------------------------------ loading

    def load(self, partition: int, owner: PartitionOwner, replay: Replay, replay_txn: ReplayTxn | None = None,
             replay_marker: ReplayMarker | None = None) -> int:
        """Replays `partition`, fences earlier owners, replays what they wrote before the fence.
        Returns the offset after the fence record. Raises LoadError."""
        self.release(partition)
        start = self._log_start(partition)
        replayers = (replay, replay_txn, replay_marker)
        position, last = self._replay_until(partition, start, None, owner.producer_id, replayers)
        sequence = 0
        if last is not None and last[0] == owner.epoch:
            sequence = (last[1] + 1) & _SEQUENCE_WRAP
        writable = _Writable(owner.producer_id, owner.epoch, sequence)
        fence_offset = self._write_fence(partition, writable)
        position, _ = self._replay_until(partition, position, fence_offset + 1, owner.producer_id, replayers)
        with self._lock:
            self._writable[partition] = writable
        return position

    def _log_start(self, partition: int) -> int:
        result = self.client.list_offset(self.topic, partition, "earliest",
                                         retry_timeout_ms=self.commit_timeout_ms)
        if result.error_code != Errors.NONE:
            raise LoadError(f"listing {self.topic}-{partition}'s log start failed: error {result.error_code}")
        return result.offset

    def _replay_until(self, partition: int, position: int, end: int | None, producer_id: int,
                      replayers: tuple[Replay, ReplayTxn | None, ReplayMarker | None],
                      ) -> tuple[int, tuple[int, int] | None]:
        """Replays from `position` up to `end` (or the high watermark when None). Returns the next
        position and the (epoch, last sequence) of the last batch written with `producer_id`."""
        last: tuple[int, int] | None = None
        while True:
            result = self.client.fetch(self.topic, partition, position, max_bytes=self.load_buffer_bytes,
                                       max_wait_ms=0 if end is None else 100,
                                       retry_timeout_ms=self.commit_timeout_ms)
            if result.error_code != Errors.NONE:
                raise LoadError(f"reading {self.topic}-{partition} at {position} failed: error "
                                f"{result.error_code}")
            goal = result.high_watermark if end is None else end
            for header, records in iter_batches(result.records):
                if header.next_offset <= position:
                    continue
                if header.producer_id == producer_id and header.producer_id >= 0:
                    last = (header.producer_epoch, header.last_sequence)
                _replay_batch(header, [r for r in records if r.offset >= position], replayers)
                position = header.next_offset
            if position >= goal:
                return position, last
            if end is None and not result.records:
                return position, last

    def _write_fence(self, partition: int, writable: _Writable) -> int:
        batch = build_batch([None], [fence_key(self.coordinator_id)], producer_id=writable.producer_id,
                            producer_epoch=writable.epoch, base_sequence=writable.next_sequence)
        result = self._produce({partition: batch})[partition]
        if result.error_code != Errors.NONE:
            raise LoadError(f"writing the fence record to {self.topic}-{partition} failed: error "
                            f"{result.error_code} {result.error_message}")
        writable.next_sequence = (writable.next_sequence + 1) & _SEQUENCE_WRAP
        return result.base_offset

    def _produce(self, batches: dict[int, bytes]):
        results = self.client.produce_many({(self.topic, p): b for p, b in batches.items()}, acks=-1,
                                           timeout_ms=self.commit_timeout_ms,
                                           retry_timeout_ms=self.commit_timeout_ms,
                                           coordinator_id=self.coordinator_id)
        return {tp.partition: result for tp, result in results.items()}

    # ------------------------------------------------------------------ the writer thread

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                self._fail_queued()
                return
            pending = [item]
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._closed = True
                    break
                pending.append(more)
            for run in _runs(pending):
                try:
                    self._write_run(run)
                except Exception:
                    logger.exception("Writing to %s failed", self.topic)
                    for failed in run:
                        _fail(failed, Errors.UNKNOWN_SERVER_ERROR)
            if self._closed:
                self._fail_queued()
                return

    def _fail_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                _fail(item, Errors.NOT_COORDINATOR)

    def _write_run(self, run: list) -> None:
        if isinstance(run[0], _TxnAppend):
            self._write_txn(run[0])
        elif isinstance(run[0], _MarkerWrite):
            self._write_marker(run[0])
        else:
            self._write(run)

    def _write_txn(self, item: _TxnAppend) -> None:
        """One transactional batch of the transaction's producer (no sequence: written by a coordinator)."""
        with self._lock:
            writable = item.partition in self._writable
        if not writable:
            _answer(item.callback, Errors.NOT_COORDINATOR)
            return
        batch = build_batch([v for _, v in item.records], [k for k, _ in item.records], compression=self.compression,
                            producer_id=item.producer_id, producer_epoch=item.producer_epoch,
                            base_sequence=NO_SEQUENCE, is_transactional=True)
        result = self._produce({item.partition: batch})[item.partition]
        if result.error_code in _IN_DOUBT:
            logger.warning("%s-%d: a transactional write failed with error %d; reloading the partition",
                           self.topic, item.partition, result.error_code)
            self.on_in_doubt(item.partition)
        ok = result.error_code == Errors.NONE
        _answer(item.callback, result.error_code, result.base_offset if ok else None)

    def _write_marker(self, item: _MarkerWrite) -> None:
        with self._lock:
            owned = [p for p in item.partitions if p in self._writable]
        codes = dict.fromkeys(item.partitions, Errors.NOT_COORDINATOR)
        if owned:
            written = self.client.write_txn_marker(item.marker, [(self.topic, p) for p in owned],
                                                   retry_timeout_ms=self.commit_timeout_ms)
            codes.update({tp.partition: code for tp, code in written.items()})
        try:
            item.callback(codes)
        except Exception:
            logger.exception("A marker callback failed")

    def _write(self, pending: list[tuple[int, Records, Callback]]) -> None:
        by_partition: dict[int, tuple[Records, list[tuple[Callback, int]]]] = {}
        for partition, records, callback in pending:
            entry = by_partition.setdefault(partition, ([], []))
            entry[1].append((callback, len(entry[0])))
            entry[0].extend(records)
        batches: dict[int, bytes] = {}
        stamps: dict[int, _Writable] = {}
        with self._lock:
            for partition, (records, callbacks) in list(by_partition.items()):
                writable = self._writable.get(partition)
                if writable is None or not records:
                    for callback, _ in callbacks:
                        _answer(callback, Errors.NONE if writable is not None else Errors.NOT_COORDINATOR)
                    del by_partition[partition]
                    continue
                batches[partition] = build_batch(
                    [v for _, v in records], [k for k, _ in records], compression=self.compression,
                    producer_id=writable.producer_id, producer_epoch=writable.epoch,
                    base_sequence=writable.next_sequence)
                stamps[partition] = _Writable(writable.producer_id, writable.epoch, writable.next_sequence)
        if not batches:
            return
        results = self._produce(batches)
        for partition in batches:
            records, callbacks = by_partition[partition]
            code = results[partition].error_code
            code = self._settle(partition, stamps[partition], len(records), code)
            base_offset = results[partition].base_offset
            for callback, index in callbacks:
                _answer(callback, code, base_offset + index if code == Errors.NONE else None)

    def _settle(self, partition: int, stamp: _Writable, count: int, code: int) -> int:
        """Advances the sequence after a success; works out what a failure means. Returns the
        error code for the callers."""
        with self._lock:
            writable = self._writable.get(partition)
            current = (writable is not None and writable.epoch == stamp.epoch
                       and writable.next_sequence == stamp.next_sequence)
            if code == Errors.NONE:
                if current:
                    writable.next_sequence = (stamp.next_sequence + count) & _SEQUENCE_WRAP
                return Errors.NONE
            fenced = code in _FENCED
            if fenced:
                self._writable.pop(partition, None)
            # the batch may or may not be in the log: the sequence is no longer known
            if current:
                self._writable.pop(partition, None)
        if fenced:
            # a newer owner wrote with a higher epoch: stop serving this partition's groups from
            # memory; reloading fails the same way until ZooKeeper shows who owns it now
            logger.warning("%s-%d: a newer owner fenced this coordinator's writes", self.topic, partition)
            self.on_in_doubt(partition)
            return Errors.NOT_COORDINATOR
        logger.warning("%s-%d: write failed with error %d; reloading the partition", self.topic, partition, code)
        self.on_in_doubt(partition)
        return code


def _answer(callback: Callback, code: int, first_offset: int | None = None) -> None:
    try:
        callback(code, first_offset)
    except Exception:
        logger.exception("A write callback failed")


def _fail(item: tuple[int, Records, Callback] | _TxnAppend | _MarkerWrite, code: int) -> None:
    if isinstance(item, _MarkerWrite):
        try:
            item.callback(dict.fromkeys(item.partitions, code))
        except Exception:
            logger.exception("A marker callback failed")
    else:
        _answer(item.callback if isinstance(item, _TxnAppend) else item[2], code)


def _runs(pending: list) -> list[list]:
    """Queue order kept: plain appends in a row go together; each transactional append or marker alone."""
    runs: list[list] = []
    for item in pending:
        if isinstance(item, tuple) and runs and isinstance(runs[-1][0], tuple):
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def _replay_batch(header, records: list, replayers: tuple[Replay, ReplayTxn | None, ReplayMarker | None]) -> None:
    """Hands one batch's records (those not replayed yet) to the replay callbacks (see the module doc)."""
    replay, replay_txn, replay_marker = replayers
    if header.is_control:
        if replay_marker is not None:
            for record in records:
                replay_marker(header.producer_id, parse_control_record(record.key, record.value).commit, record.offset)
        return
    for record in records:
        if is_fence_key(record.key):
            continue
        if header.is_transactional and replay_txn is not None:
            replay_txn(record.key, record.value, record.offset, record.timestamp, header.producer_id)
        else:
            replay(record.key, record.value, record.offset, record.timestamp)
