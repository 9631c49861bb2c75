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

import operator
import struct
import sys
from array import array

from services.broker.log.errors import CorruptIndexError
from services.broker.log.index import (
    PENDING_ENTRIES,
    IndexFullError,
    InvalidOffsetError,
    MmapIndex,
    entry_key,
)

_ENTRY = struct.Struct(">ii")
_BY_OFFSET = entry_key(_ENTRY, 0)
_BY_POSITION = entry_key(_ENTRY, 1)


class OffsetIndex(MmapIndex):
    ENTRY = _ENTRY
    ENTRY_SIZE = _ENTRY.size

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
        relative, position = self._raw_entry(slot)
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

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, else (base offset, 0)."""
        found = self._floor(_BY_OFFSET, target_offset - self.base_offset)[1]
        return (self.base_offset, 0) if found is None else (self.base_offset + found[0], found[1])

    def lookup_position(self, target_offset: int) -> int:
        found = self._floor(_BY_OFFSET, target_offset - self.base_offset)[1]
        return 0 if found is None else found[1]

    def lookup_by_position(self, position: int) -> int:
        """The largest indexed position <= `position` (0 if none): the start of a batch."""
        found = self._floor(_BY_POSITION, position)[1]
        return 0 if found is None else found[1]

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """The first indexed offset whose position is >= start_position + fetch_size, if any."""
        slot = self._floor(_BY_POSITION, start_position + fetch_size - 1)[0] + 1
        return None if slot == self._entries else self.entry(slot)[0]

    def truncate_to(self, offset: int) -> None:
        """Removes every entry with offset >= `offset`."""
        self._truncate_to_key(_BY_OFFSET, offset - self.base_offset)

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
