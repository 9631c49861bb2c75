"""`OffsetMap`: the cleaner's key -> latest offset map over a log's dirty section, in bounded memory.

Kafka's SkimpyOffsetMap stores a 16-byte MD5 of each key next to an 8-byte offset in a fixed
buffer and treats equal hashes as equal keys. Here the map is a dict of the key bytes themselves
(so two keys never collide), and its memory is accounted instead of preallocated: every entry is
charged `len(key) + ENTRY_OVERHEAD_BYTES` (the dict slot, the key object and the offset object, as
measured on CPython 3.11). The map counts as full once the next entry would take it beyond
`load_factor` of its budget, the role `log.cleaner.io.buffer.load.factor` plays in Kafka.

`latest_offset` is the highest offset the map covers: the last offset put, or a batch or segment
end moved past with `update_latest_offset`. The cleaner retains every record above it untouched.
Not thread-safe: each cleaner owns its map.
"""

from __future__ import annotations

from collections.abc import Sequence

ENTRY_OVERHEAD_BYTES = 120
DEFAULT_LOAD_FACTOR = 0.9


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} is not in (0, 1]")
        self.memory_bytes = memory_bytes
        self.load_factor = load_factor
        self._capacity = int(memory_bytes * load_factor)
        self._offsets: dict[bytes, int] = {}
        self._used = 0
        self._latest = -1

    @property
    def size(self) -> int:
        """The number of keys in the map."""
        return len(self._offsets)

    @property
    def used_bytes(self) -> int:
        return self._used

    @property
    def utilization(self) -> float:
        return self._used / self.memory_bytes if self.memory_bytes else 1.0

    @property
    def latest_offset(self) -> int:
        return self._latest

    def can_hold(self, key: bytes) -> bool:
        """Whether one more entry for `key` fits the budget (a key already present always fits)."""
        return self._used + len(key) + ENTRY_OVERHEAD_BYTES <= self._capacity or key in self._offsets

    def put(self, key: bytes, offset: int) -> bool:
        """Maps `key` to `offset` (later offsets win); False, changing nothing, if the map is full."""
        offsets = self._offsets
        if key not in offsets:
            cost = len(key) + ENTRY_OVERHEAD_BYTES
            if self._used + cost > self._capacity:
                return False
            self._used += cost
        offsets[key] = offset
        self._latest = offset
        return True

    def put_all(self, keys: Sequence[bytes], offsets: Sequence[int]) -> int:
        """Puts (key, offset) pairs in order, none of the keys None; returns how many fit.

        All pairs go in one step when their new keys fit the budget, else one by one up to the
        first that does not.
        """
        count = len(keys)
        if not count:
            return 0
        table = self._offsets
        fresh = set(keys).difference(table)
        cost = sum(map(len, fresh)) + len(fresh) * ENTRY_OVERHEAD_BYTES
        if self._used + cost <= self._capacity:
            table.update(zip(keys, offsets, strict=True))
            self._used += cost
            self._latest = offsets[-1]
            return count
        put = self.put
        for i in range(count):
            if not put(keys[i], offsets[i]):
                return i
        return count

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, or -1 if the map does not hold it."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self._latest:
            self._latest = offset

    def clear(self) -> None:
        self._offsets = {}
        self._used = 0
        self._latest = -1

    def lookup(self):
        """The bound `get` of the underlying dict (key -> offset, with a default), for hot loops."""
        return self._offsets.get

    def __contains__(self, key: bytes) -> bool:
        return key in self._offsets

    def __len__(self) -> int:
        return len(self._offsets)
