"""`OffsetIndex`: the sparse offset index of one segment, the `.index` file.

Byte layout (Kafka's): a sequence of 8-byte entries, big-endian, no header:

    offset  size  field
    0       4     relativeOffset  int32, offset - segment base offset
    4       4     position        int32, byte position in the .log file of a batch whose
                                  last offset is base + relativeOffset (or a batch before it)

Entries are strictly increasing in both fields. The segment appends one entry each time more
than `index.interval.bytes` of log data has been written since the previous one, so a lookup
lands at most that many bytes (plus one batch) before the wanted batch.
"""

from __future__ import annotations

import bisect
import operator
import struct
import sys
from array import array

from services.broker.log.errors import CorruptIndexError
from services.broker.log.index import (
    PENDING_ENTRIES,
    UNMAPPED,
    IndexFullError,
    InvalidOffsetError,
    MmapIndex,
)

_ENTRY = struct.Struct(">ii")
_INT32 = struct.Struct(">i")
_POSITION = struct.Struct(">4xi")
_ABOVE_ANY = 0x7FFFFFFF + 1


def _position_of(entry: tuple[int, int]) -> int:
    return entry[1]


class OffsetIndex(MmapIndex):
    ENTRY_SIZE = 8
    ENTRY = _ENTRY

    def _on_entries_changed(self) -> None:
        if self._entries:
            relative, _ = self._entry_at(self._entries - 1)
            self._last_offset = self.base_offset + relative
        else:
            self._last_offset = self.base_offset

    @property
    def last_offset(self) -> int:
        """The largest offset indexed, or the base offset when empty."""
        return self._last_offset

    def entry(self, slot: int) -> tuple[int, int]:
        """(offset, position) of entry `slot`."""
        if not 0 <= slot < self._entries:
            raise IndexError(f"slot {slot} out of range for {self._entries} entries in {self.path}")
        relative, position = self._entry_at(slot)
        return self.base_offset + relative, position

    def append(self, offset: int, position: int) -> None:
        entries = self._entries
        if entries >= self._max_entries:
            raise IndexFullError(f"cannot append to the full index {self.path} ({entries} entries)")
        if entries and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is not larger than the last indexed offset {self._last_offset}")
        relative = offset - self.base_offset
        if not 0 <= relative <= 0x7FFFFFFF:
            relative = self.relative_offset(offset)  # raises
        pending = self._tail[1]
        pending.append((relative, position))
        self._entries = entries + 1
        self._last_offset = offset
        if len(pending) >= PENDING_ENTRIES:
            self.write_pending()

    def _find(self, relative: int) -> tuple[int, int] | None:
        """The raw (relative offset, position) of the largest entry with relative offset <= target."""
        written, pending = self._tail
        if pending and pending[0][0] <= relative:
            return pending[bisect.bisect_right(pending, (relative, _ABOVE_ANY)) - 1]
        mm = self._mm
        if mm is UNMAPPED:
            mm = self._mapping() if written else None
        slot = self._file_slot(relative, written, mm)
        return None if slot < 0 else _ENTRY.unpack_from(mm, slot << 3)

    def _file_slot(self, relative: int, written: int, mm) -> int:
        """Binary search of the first `written` entries of the file; the slot found, or -1."""
        if mm is None:
            return -1
        hi = written - 1
        unpack = _INT32.unpack_from
        if hi < 0 or unpack(mm, 0)[0] > relative:
            return -1
        lo = 0
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid << 3)[0] <= relative:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, else (base offset, 0)."""
        found = self._find(target_offset - self.base_offset)
        return (self.base_offset, 0) if found is None else (self.base_offset + found[0], found[1])

    def lookup_position(self, target_offset: int) -> int:
        found = self._find(target_offset - self.base_offset)
        return 0 if found is None else found[1]

    def lookup_by_position(self, position: int) -> int:
        """The largest indexed position <= `position` (0 if none): the start of a batch."""
        written, pending = self._tail
        if pending and pending[0][1] <= position:
            return pending[bisect.bisect_right(pending, position, key=_position_of) - 1][1]
        mm = self._mm
        if mm is UNMAPPED:
            mm = self._mapping() if written else None
        hi = written - 1 if mm is not None else -1
        unpack = _POSITION.unpack_from
        if hi < 0 or unpack(mm, 0)[0] > position:
            return 0
        lo = 0
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid << 3)[0] <= position:
                lo = mid
            else:
                hi = mid - 1
        return unpack(mm, lo << 3)[0]

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """The first indexed offset whose position is >= start_position + fetch_size, if any."""
        target = start_position + fetch_size
        lo, hi = 0, self._entries
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._entry_at(mid)[1] < target:
                lo = mid + 1
            else:
                hi = mid
        return None if lo == self._entries else self.entry(lo)[0]

    def truncate_to(self, offset: int) -> None:
        """Removes every entry with offset >= `offset`."""
        self.write_pending()
        relative = offset - self.base_offset
        mm = self._mapping()
        slot = self._file_slot(relative, self._entries, mm)
        if slot >= 0 and _INT32.unpack_from(mm, slot << 3)[0] != relative:
            slot += 1
        self.truncate_to_entries(max(slot, 0))

    def sanity_check(self, log_size: int | None = None) -> None:
        """Raises CorruptIndexError unless entries are strictly increasing and point into the log."""
        self._check_length()
        if not self._entries:
            return
        values = array("i")
        values.frombytes(self.raw_entries())
        if sys.byteorder == "little":
            values.byteswap()
        relatives, positions = values[0::2], values[1::2]
        if relatives[0] < 0 or positions[0] < 0:
            raise CorruptIndexError(f"index {self.path} starts below its base offset or position 0")
        if not all(map(operator.lt, relatives, relatives[1:])):
            raise CorruptIndexError(f"index {self.path} has offsets that do not increase")
        if not all(map(operator.lt, positions, positions[1:])):
            raise CorruptIndexError(f"index {self.path} has positions that do not increase")
        if log_size is not None and positions[-1] >= log_size:
            raise CorruptIndexError(
                f"index {self.path} points at position {positions[-1]} beyond the log's {log_size} bytes")
