"""`MmapIndex`: what the offset and time indexes share — a memory-mapped file of fixed-size entries.

A new index file is preallocated to `segment.index.bytes` rounded down to a whole number of
entries (with `create_lazily`, when `create_file` creates it: the segment's first write);
`trim_to_valid_size` cuts it back to its valid entries when the segment stops being active or is
closed. An existing file is assumed full of valid entries (its length / entry size);
`sanity_check` verifies that, and the owning segment rebuilds both indexes when it fails.

Lookups read a read-only shared mapping of the file, made on the first lookup that reaches the
file's entries (as Kafka's lazy indexes), so thousands of idle partitions cost neither mappings nor
descriptors (CPython keeps a duplicate descriptor per mapping). New entries first collect in a
short in-memory tail (at most `PENDING_ENTRIES`), which lookups search too, and are then written
with one `pwrite` through a descriptor opened on the first write and kept while the index grows;
anything that needs the file (flush, trim, truncation, sanity check) writes the tail first. The
page cache is shared, so the mapping sees written entries at once, and appends never take the
page fault a store into a mapping takes whenever writeback has cleaned the page (which made such
stores the dominant cost of large appends). A crash may lose the tail: the active segment's
indexes are rebuilt by recovery anyway.

Readers never lock: they take the (entries in the file, tail) pair in one read; the writer appends
to the tail in place and replaces the pair only after writing it out. After a resize the next
lookup maps the file again; a reader still holding the previous mapping keeps a valid view of the
slots it knew. Entry layouts are documented by the subclasses (`offset_index`, `time_index`).

`_floor` is the one binary search of both index types: the last entry whose value of a sorted
field (an `EntryKey`: the offset, the position or the timestamp) is <= a target, in the tail or
the file. Searches for the first entry >= a target ask for the last one < it (keys are integers).
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from collections.abc import Callable
from operator import itemgetter
from typing import ClassVar, NamedTuple

from services.broker.log.errors import CorruptIndexError
from services.broker.log.segment_file import SegmentFile, open_fd


class InvalidOffsetError(ValueError):
    """An index append that would break the index's ordering."""


class IndexFullError(ValueError):
    """An append to an index with no free slot."""


PENDING_ENTRIES = 64


def round_down(value: int, multiple: int) -> int:
    return value - value % multiple


def _map(fd: int, length: int) -> mmap.mmap | None:
    return mmap.mmap(fd, length, prot=mmap.PROT_READ) if length else None


class EntryKey(NamedTuple):
    """A field an index's entries are sorted by: a getter of it from an entry tuple, and a reader
    of it (as a 1-tuple) from the start of an entry in the file."""

    of_entry: Callable[[tuple[int, int]], int]
    unpack_from: Callable[..., tuple[int]]


def entry_key(entry: struct.Struct, field: int) -> EntryKey:
    """The key of field `field` of the entry layout `entry` (single-character codes, e.g. `>qi`)."""
    byte_order, codes = entry.format[0], entry.format[1:]
    skip = struct.calcsize(byte_order + codes[:field])
    return EntryKey(itemgetter(field), struct.Struct(f"{byte_order}{skip}x{codes[field]}").unpack_from)


class _Unmapped:
    """Marks an index whose file has not been mapped yet (existing indexes map on first lookup)."""


UNMAPPED = _Unmapped()


class MmapIndex(SegmentFile):
    ENTRY_SIZE: ClassVar[int]
    ENTRY: ClassVar[struct.Struct]

    def __init__(self, path: str, base_offset: int, max_index_size: int, *, create_lazily: bool = False) -> None:
        super().__init__(path, on_disk=not create_lazily)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        # mapped on the first lookup that needs the file, written through a descriptor opened
        # on the first write: an idle index holds neither (a mapping keeps a descriptor too)
        self._mm: mmap.mmap | _Unmapped | None = UNMAPPED
        self._opening_fd: int | None = None
        if create_lazily:  # a new segment's index: empty, its file made by `create_file`
            self._check_max_index_size()
            self._set_entries(round_down(max_index_size, self.ENTRY_SIZE), 0)
            return
        newly_created = not os.path.exists(path)
        fd = open_fd(path, create=True)
        try:
            if newly_created:
                self._check_max_index_size()
                os.ftruncate(fd, round_down(max_index_size, self.ENTRY_SIZE))
            length = os.fstat(fd).st_size
            self._opening_fd = fd
            self._set_entries(length, 0 if newly_created else length // self.ENTRY_SIZE)
        finally:
            self._opening_fd = None
            os.close(fd)

    def _set_entries(self, length: int, entries: int) -> None:
        """The state of a file of `length` bytes holding `entries` entries, all written."""
        self._length = length
        self._max_entries = length // self.ENTRY_SIZE
        self._entries = entries
        self._tail: tuple[int, list[tuple[int, int]]] = (entries, [])  # (in the file, not yet)
        self._on_entries_changed()

    def _check_max_index_size(self) -> None:
        if self.max_index_size < self.ENTRY_SIZE:
            raise ValueError(f"invalid max index size {self.max_index_size}")

    def _on_file_created(self, fd: int) -> bool:
        os.ftruncate(fd, self._length)
        return False

    def _mapping(self) -> mmap.mmap | None:
        """The mapping of the file's entries, made on first use; None if empty or gone."""
        mm = self._mm
        if mm is not UNMAPPED:
            return mm
        try:
            fd = open_fd(self.path, read_only=True)
        except FileNotFoundError:
            return None  # deleted under a late reader: lookups fall back to scanning the log
        try:
            while True:
                try:
                    mm = _map(fd, min(self._length, os.fstat(fd).st_size))
                    break
                except ValueError:  # trimmed (a roll) between the fstat and the mapping: measure again
                    continue
        finally:
            os.close(fd)
        self._mm = mm
        return mm

    def _write_fd(self) -> int:
        """The descriptor appends write through: kept while the index grows, closed once trimmed."""
        if self._fd is None:
            self.create_file()
            return self._keep_fd(open_fd(self.path))
        return self._fd

    def _close_fd(self) -> None:
        super()._close_fd()
        self._fd = None

    def _append(self, entry: tuple[int, int]) -> None:
        """Adds an entry the subclass checked; it reaches the file with the next group or flush."""
        pending = self._tail[1]
        pending.append(entry)
        self._entries += 1
        if len(pending) >= PENDING_ENTRIES:
            self.write_pending()

    def write_pending(self) -> None:
        """Writes the in-memory tail of entries to the file."""
        written, pending = self._tail
        if not pending:
            return
        pack = self.ENTRY.pack
        data = b"".join([pack(*entry) for entry in pending])
        fd = self._fd if self._fd is not None else self._write_fd()
        if os.pwrite(fd, data, written * self.ENTRY_SIZE) != len(data):
            raise OSError(f"short write of index entries to {self.path}")
        self._tail = (written + len(pending), [])

    def _entry_at(self, slot: int) -> tuple[int, int]:
        """The raw entry (key, value) of `slot`, from the file or the tail."""
        written, pending = self._tail
        if slot >= written:
            return pending[slot - written]
        mm = self._mm
        if mm is UNMAPPED:
            if self._opening_fd is not None:  # while opening: read it without mapping the file
                return self.ENTRY.unpack(os.pread(self._opening_fd, self.ENTRY_SIZE, slot * self.ENTRY_SIZE))
            mm = self._mapping()
        return self.ENTRY.unpack_from(mm, slot * self.ENTRY_SIZE)

    def _raw_entry(self, slot: int) -> tuple[int, int]:
        """The raw entry of `slot`, which must be one of the index's entries."""
        if not 0 <= slot < self._entries:
            raise IndexError(f"slot {slot} out of range for {self._entries} entries in {self.path}")
        return self._entry_at(slot)

    def _floor(self, key: EntryKey, target: int) -> tuple[int, tuple[int, int] | None]:
        """(slot, raw entry) of the last entry whose `key` is <= target, or (-1, None)."""
        written, pending = self._tail
        of_entry = key.of_entry
        if pending and of_entry(pending[0]) <= target:
            slot = bisect.bisect_right(pending, target, key=of_entry) - 1
            return written + slot, pending[slot]
        mm = self._mm
        if mm is UNMAPPED:
            mm = self._mapping() if written else None
        if mm is None:
            return -1, None
        unpack = key.unpack_from
        size = self.ENTRY_SIZE
        hi = written - 1
        if hi < 0 or unpack(mm, 0)[0] > target:
            return -1, None
        lo = 0
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo, self.ENTRY.unpack_from(mm, lo * size)

    def _truncate_to_key(self, key: EntryKey, target: int) -> None:
        """Removes every entry whose `key` is >= target."""
        self.write_pending()
        self.truncate_to_entries(self._floor(key, target - 1)[0] + 1)

    # -- state ---------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def length(self) -> int:
        """The file's current length in bytes (preallocated or trimmed)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def _on_entries_changed(self) -> None:
        """Subclasses refresh their cached last entry here."""

    def relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > 0x7FFFFFFF:
            raise InvalidOffsetError(f"offset {offset} is not storable relative to base {self.base_offset}")
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF

    def raw_entries(self) -> bytes:
        """The file's valid entries as bytes (read without mapping the file if not mapped yet)."""
        self.write_pending()
        size = self._entries * self.ENTRY_SIZE
        mm = self._mm
        if not size:
            return b""
        if mm is UNMAPPED:
            with open(self.path, "rb") as f:
                return f.read(size)
        return mm[:size] if mm is not None else b""

    # -- size changes --------------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Sets the file length (rounded down to whole entries); True if it changed."""
        rounded = round_down(max(new_size, 0), self.ENTRY_SIZE)
        if rounded == self._length:
            return False
        self.write_pending()
        if rounded < self._entries * self.ENTRY_SIZE:
            self._entries = rounded // self.ENTRY_SIZE
            self._tail = (self._entries, [])
            self._on_entries_changed()
        # a reset index (recovery rebuilding thousands of them) keeps no descriptor open
        self._set_file_length(rounded)
        self._length = rounded
        # mapped again on the next lookup; the previous mapping closes when its last reader drops it
        self._mm = UNMAPPED if rounded else None
        self._max_entries = rounded // self.ENTRY_SIZE
        return True

    def trim_to_valid_size(self) -> None:
        """Cuts the file to its entries; appends are not expected until the next resize."""
        self.write_pending()
        self.resize(self._entries * self.ENTRY_SIZE)
        self._close_fd()

    def truncate_to_entries(self, entries: int) -> None:
        self.write_pending()
        self._entries = min(entries, self._entries)
        self._tail = (self._entries, [])
        self._on_entries_changed()

    def reset(self) -> None:
        """Drops every entry and preallocates again (used before rebuilding)."""
        self._entries = 0
        self._tail = (0, [])
        self._on_entries_changed()
        self.resize(self.max_index_size)

    # -- files ---------------------------------------------------------------------------------

    def flush(self) -> None:
        self.write_pending()
        super().flush()

    def close(self) -> None:
        if not self.on_disk or not os.path.exists(self.path):
            self.close_handler()
            return
        self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        if isinstance(self._mm, mmap.mmap):
            self._mm.close()
        self._mm = None
        self._close_fd()

    def _check_length(self) -> None:
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"index file {self.path} has {self._length} bytes, not a multiple of {self.ENTRY_SIZE}")
