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

import bisect
import operator
import struct

from services.broker.log.errors import CorruptIndexError
from services.broker.log.index import UNMAPPED, IndexFullError, InvalidOffsetError, MmapIndex

NO_TIMESTAMP = -1
_ENTRY = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_REL = struct.Struct(">8xi")
_ABOVE_ANY = 0x7FFFFFFF + 1


class TimeIndex(MmapIndex):
    ENTRY_SIZE = 12
    ENTRY = _ENTRY

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
        if not 0 <= slot < self._entries:
            raise IndexError(f"slot {slot} out of range for {self._entries} entries in {self.path}")
        timestamp, relative = self._entry_at(slot)
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

    def _slot_for_timestamp(self, target: int, written: int, mm) -> int:
        if mm is None:
            return -1
        hi = written - 1
        unpack = _INT64.unpack_from
        if hi < 0 or unpack(mm, 0)[0] > target:
            return -1
        lo = 0
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * 12)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _slot_for_offset(self, target: int) -> int:
        hi = self._entries - 1
        mm = self._mapping()
        relative = target - self.base_offset
        unpack = _REL.unpack_from
        if hi < 0 or unpack(mm, 0)[0] > relative:
            return -1
        lo = 0
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * 12)[0] <= relative:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base offset)."""
        written, pending = self._tail
        if pending and pending[0][0] <= target_timestamp:
            timestamp, relative = pending[bisect.bisect_right(pending, (target_timestamp, _ABOVE_ANY)) - 1]
            return timestamp, self.base_offset + relative
        mm = self._mm
        if mm is UNMAPPED:
            mm = self._mapping() if written else None
        slot = self._slot_for_timestamp(target_timestamp, written, mm)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        timestamp, relative = _ENTRY.unpack_from(mm, slot * 12)
        return timestamp, self.base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Removes every entry with offset >= `offset`."""
        self.write_pending()
        slot = self._slot_for_offset(offset)
        if slot < 0:
            keep = 0
        elif self.entry(slot)[1] == offset:
            keep = slot
        else:
            keep = slot + 1
        self.truncate_to_entries(keep)

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
