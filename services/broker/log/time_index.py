"""`TimeIndex`: the sparse time index of one segment, the `.timeindex` file.

Byte layout (Kafka's): a sequence of 12-byte entries, big-endian, no header:

    offset  size  field
    0       8     timestamp       int64, the largest batch maxTimestamp seen so far in the segment
    8       4     relativeOffset  int32, offset - base offset of the batch holding that timestamp
                                  (its last offset)

Timestamps strictly increase and offsets never decrease: an entry is only added when the
segment's max timestamp grew. Entries are added next to offset index entries and once more when
the segment stops being active, so the last entry holds the segment's largest timestamp. One slot
is always kept free for that final entry (`is_full` is one entry early, as in Kafka).
"""

from __future__ import annotations

import operator
import struct

from services.broker.log.errors import CorruptIndexError
from services.broker.log.index import IndexFullError, InvalidOffsetError, MmapIndex, entry_key
from services.common.shared_types import NO_TIMESTAMP

_ENTRY = struct.Struct(">qi")
_BY_TIMESTAMP = entry_key(_ENTRY, 0)
_BY_OFFSET = entry_key(_ENTRY, 1)


class TimeIndex(MmapIndex):
    ENTRY = _ENTRY
    ENTRY_SIZE = _ENTRY.size

    def _on_entries_changed(self) -> None:
        if self._entries:
            timestamp, relative = self._entry_at(self._entries - 1)
            self._last_entry = (timestamp, self.base_offset + relative)
        else:
            self._last_entry = (NO_TIMESTAMP, self.base_offset)

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        return self._last_entry

    def entry(self, slot: int) -> tuple[int, int]:
        timestamp, relative = self._raw_entry(slot)
        return timestamp, self.base_offset + relative

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Appends (timestamp, offset) if the timestamp is larger than the last entry's."""
        entries = self._entries
        last_timestamp, last_offset = self._last_entry
        if entries and offset < last_offset:
            raise InvalidOffsetError(f"offset {offset} is smaller than the last indexed {last_offset}")
        if entries and timestamp < last_timestamp:
            raise InvalidOffsetError(
                f"timestamp {timestamp} is smaller than the last indexed timestamp {last_timestamp}")
        if timestamp <= last_timestamp:
            return
        if entries >= self._max_entries or (not skip_full_check and self.is_full):
            if skip_full_check:
                return  # no room even for the final entry: the index was sized too small
            raise IndexFullError(f"cannot append to the full time index {self.path}")
        self._append((timestamp, self.relative_offset(offset)))
        self._last_entry = (timestamp, offset)
        self._entries = entries + 1

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base offset)."""
        found = self._floor(_BY_TIMESTAMP, target_timestamp)[1]
        if found is None:
            return NO_TIMESTAMP, self.base_offset
        return found[0], self.base_offset + found[1]

    def truncate_to(self, offset: int) -> None:
        """Removes every entry with offset >= `offset`."""
        self._truncate_to_key(_BY_OFFSET, offset - self.base_offset)

    def sanity_check(self) -> None:
        """Raises CorruptIndexError unless timestamps strictly increase and offsets never decrease."""
        self._check_length()
        if not self._entries:
            return
        values = struct.unpack(">" + "qi" * self._entries, self.raw_entries())
        timestamps, relatives = values[0::2], values[1::2]
        if relatives[0] < 0:
            raise CorruptIndexError(f"time index {self.path} starts below its base offset")
        if not all(map(operator.lt, timestamps, timestamps[1:])):
            raise CorruptIndexError(f"time index {self.path} has timestamps that do not increase")
        if not all(map(operator.le, relatives, relatives[1:])):
            raise CorruptIndexError(f"time index {self.path} has offsets that decrease")
