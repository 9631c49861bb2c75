"""`FileRecords`: one segment's `.log` file — record batches back to back, exactly as produced.

Byte layout: a concatenation of RecordBatch v2 batches (see `services.common.records.batch`), each
with its final baseOffset and partitionLeaderEpoch; nothing else. With `preallocate` the file is
created at `segment.bytes` and trailing zeros follow the data until the segment is trimmed.

Writes are positional (`os.pwritev` at the current size) of whole batches in one call. Reads are
`os.pread` of byte ranges; searches walk batch headers only (the first 43 bytes of each batch:
baseOffset, batchLength, partitionLeaderEpoch, ..., lastOffsetDelta, baseTimestamp,
maxTimestamp), never records — except `search_for_timestamp`, which decodes the one batch that
holds the answer (as Kafka's ListOffsets does).

The descriptor is kept, closed, renamed and unlinked as every segment file's is (`segment_file`);
opened with `create_lazily`, a new file is created (and preallocated) only by `create_file`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from services.broker.log.info import TimestampAndOffset
from services.broker.log.segment_file import SegmentFile, open_fd
from services.common.records.batch import HEADER_SIZE
from services.common.records.reader import decode_batch
from services.common.shared_types import NO_TIMESTAMP

_HEAD = struct.Struct(">qiibIhiqq")  # baseOffset .. maxTimestamp
HEAD_SIZE = _HEAD.size  # 43
FIRST_SCAN_BYTES = 8 * 1024
SCAN_CHUNK_BYTES = 64 * 1024
try:
    IOV_MAX = os.sysconf("SC_IOV_MAX")
except (AttributeError, ValueError, OSError):  # pragma: no cover - every Linux has it
    IOV_MAX = 1024


class BatchHead(NamedTuple):
    """Where one batch sits in the file and what its header says."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    partition_leader_epoch: int


def _write_rest(fd: int, records, written: int, position: int) -> None:
    """Finishes a write the kernel took only part of."""
    rest = memoryview(b"".join(records) if type(records) is list else records)[written:]
    position += written
    while rest:
        n = os.pwrite(fd, rest, position)
        if n <= 0:
            raise OSError(f"short write of {len(rest)} bytes at position {position}")
        rest = rest[n:]
        position += n


class FileRecords(SegmentFile):
    _fd: int  # kept from open (or creation) to the end: reads after close() fail with EBADF

    def __init__(self, path: str, fd: int | None, size: int, preallocate_bytes: int = 0) -> None:
        super().__init__(path, on_disk=fd is not None)
        self.size = size
        self._preallocate_bytes = preallocate_bytes  # the length of a file created lazily
        if fd is not None:
            self._keep_fd(fd)

    @classmethod
    def open(cls, path: str, *, file_already_exists: bool = False, init_file_size: int = 0,
             preallocate: bool = False, create_lazily: bool = False) -> FileRecords:
        """The records of `path`; with `create_lazily` (a new, empty segment) the file is
        created by `create_file`, before the first write."""
        if create_lazily and not file_already_exists:
            return cls(path, None, 0, init_file_size if preallocate else 0)
        fd = open_fd(path, create=True)
        try:
            if not file_already_exists and preallocate and init_file_size > 0:
                os.ftruncate(fd, init_file_size)
                size = 0
            else:
                size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, size)

    def _on_file_created(self, fd: int) -> bool:
        if self._preallocate_bytes > 0:
            os.ftruncate(fd, self._preallocate_bytes)
        self._keep_fd(fd)
        return True

    # -- writes --------------------------------------------------------------------------------

    def append(self, records, size: int) -> None:
        """Writes `records` (bytes-like, or a list of bytes-like pieces) at the end in one call."""
        position = self.size
        try:
            if type(records) is list and len(records) <= IOV_MAX:
                written = os.pwritev(self._fd, records, position)
            else:
                written = os.pwrite(self._fd, b"".join(records) if type(records) is list else records,
                                    position)
            if written != size:
                _write_rest(self._fd, records, written, position)
        except BaseException:
            self._discard_tail(position)
            raise
        self.size = position + size

    def append_stamped(self, prefix: bytes, batch, size: int) -> None:
        """Writes `prefix` in place of the first bytes of `batch` (`size` bytes long) at the end."""
        position = self.size
        pieces = [prefix, batch[len(prefix):]]
        try:
            written = os.pwritev(self._fd, pieces, position)
            if written != size:
                _write_rest(self._fd, pieces, written, position)
        except BaseException:
            self._discard_tail(position)
            raise
        self.size = position + size

    def _discard_tail(self, size: int) -> None:
        try:
            self._set_file_length(size)
        except OSError:
            pass

    def truncate_to(self, target_size: int) -> int:
        """Cuts the file to `target_size` bytes; returns how many were removed."""
        if target_size > self.size or target_size < 0:
            raise ValueError(f"cannot truncate {self.path} of {self.size} bytes to {target_size}")
        removed = self.size - target_size
        self._set_file_length(target_size)
        self.size = target_size
        return removed

    def trim(self) -> None:
        """Drops preallocated space after the data."""
        if self.on_disk and os.fstat(self._fd).st_size != self.size:
            self._set_file_length(self.size)

    # -- reads ---------------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def heads(self, start: int = 0, end: int | None = None) -> Iterator[BatchHead]:
        """Yields the header of every whole batch in [start, end), stopping at anything shorter."""
        end = self.size if end is None else end
        fd = self._fd
        unpack = _HEAD.unpack_from
        buf = b""
        buf_start = start
        want = FIRST_SCAN_BYTES
        pos = start
        while end - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEAD_SIZE > len(buf):
                buf = os.pread(fd, min(want, end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < HEAD_SIZE:
                    return
            base, length, epoch, _magic, _crc, _attr, delta, _first, max_ts = unpack(buf, off)
            size = length + 12
            if size < HEADER_SIZE or pos + size > end:
                return
            yield BatchHead(pos, size, base, base + delta, max_ts, epoch)
            pos += size
            want = HEAD_SIZE if size >= SCAN_CHUNK_BYTES // 2 else SCAN_CHUNK_BYTES

    def search_for_offset_with_size(self, target_offset: int, start: int,
                                    end: int | None = None) -> tuple[int, int] | None:
        """(position, size) of the first batch from `start` whose last offset is >= target."""
        for head in self.heads(start, end):
            if head.last_offset >= target_offset:
                return head.position, head.size
        return None

    def search_for_timestamp(self, target_timestamp: int, start: int,
                             starting_offset: int) -> TimestampAndOffset | None:
        """The first record at or after `start` with timestamp >= target and offset >= starting_offset."""
        for head in self.heads(start):
            if head.max_timestamp < target_timestamp or head.last_offset < starting_offset:
                continue
            _, records = decode_batch(self.read(head.position, head.size))
            for record in records:
                if record.timestamp >= target_timestamp and record.offset >= starting_offset:
                    epoch = head.partition_leader_epoch
                    return TimestampAndOffset(record.timestamp, record.offset, epoch if epoch >= 0 else None)
        return None

    def largest_timestamp_after(self, start: int) -> tuple[int, int]:
        """(max timestamp, last offset of its batch) over batches from `start`, or (-1, -1)."""
        best = (NO_TIMESTAMP, -1)
        for head in self.heads(start):
            if head.max_timestamp > best[0]:
                best = (head.max_timestamp, head.last_offset)
        return best

    # -- files ---------------------------------------------------------------------------------

    @property
    def last_modified_ms(self) -> int:
        """The file's modification time (of a file on disk)."""
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    def set_last_modified_ms(self, ms: int) -> None:
        os.utime(self.path, ns=(ms * 1_000_000, ms * 1_000_000))

    def close(self) -> None:
        if not self.closed:
            try:
                self.trim()
            finally:
                self._close_fd()

    def close_handler(self) -> None:
        self._close_fd()


_OFFSET_LENGTH = struct.Struct(">qi")


def whole_batches_end(data, max_offset: int | None = None) -> int:
    """Length of the leading run of whole batches in `data` whose base offset is below max_offset."""
    unpack = _OFFSET_LENGTH.unpack_from
    end = len(data)
    pos = 0
    if max_offset is None:
        while end - pos >= 12:
            size = unpack(data, pos)[1] + 12
            if pos + size > end or size < HEADER_SIZE:
                break
            pos += size
    else:
        while end - pos >= 12:
            base, length = unpack(data, pos)
            size = length + 12
            if base >= max_offset or pos + size > end or size < HEADER_SIZE:
                break
            pos += size
    return pos
