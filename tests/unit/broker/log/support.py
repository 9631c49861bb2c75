"""Shared pieces of the storage engine tests: batches, logs on a manual clock, reading back offsets."""

from __future__ import annotations

import os

from services.broker.log import Log, LogConfig
from services.common.clock import ManualClock
from services.common.records import build_batch, iter_batches
from services.common.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, compute_crc, parse_header
from services.common.scheduler import ManualScheduler

START_MS = 1_600_000_000_000


def manual_clock() -> ManualClock:
    return ManualClock(start_time_ms=START_MS)


def batch(count: int = 1, *, timestamp: int = START_MS, value_size: int = 10, base_offset: int = 0,
          epoch: int = -1, timestamps=None) -> bytes:
    """A batch of `count` records of `value_size` bytes (base offset 0 unless given)."""
    values = [bytes([i % 256]) * value_size for i in range(count)]
    return build_batch(values, timestamps=timestamps if timestamps is not None else timestamp,
                       base_offset=base_offset, partition_leader_epoch=epoch)


def config(**overrides) -> LogConfig:
    """A LogConfig from snake_case overrides (`segment_bytes=1024`)."""
    return LogConfig(**overrides)


def open_log(path, cfg: LogConfig | None = None, clock: ManualClock | None = None,
             scheduler: ManualScheduler | None = None, **kwargs) -> Log:
    return Log(os.fspath(path), cfg or LogConfig(), clock=clock or manual_clock(), scheduler=scheduler,
               **kwargs)


def open_descriptors() -> int:
    """How many descriptors this process holds (Linux)."""
    return len(os.listdir("/proc/self/fd"))


def batches_in(data) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch in a read result."""
    return [(h.base_offset, h.last_offset) for h, _ in iter_batches(bytes(data))]


def offsets_in(data) -> list[int]:
    return [r.offset for _, records in iter_batches(bytes(data)) for r in records]


def read_all(log: Log, start: int | None = None, max_bytes: int = 1 << 20) -> list[int]:
    """Every record offset from `start` (default: the log start offset) to the log end."""
    offset = log.log_start_offset if start is None else start
    found = []
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes).records
        if not len(data):
            break
        found.extend(o for o in offsets_in(data) if o >= offset)
        offset = parse_last_next_offset(data)
    return found


def parse_last_next_offset(data) -> int:
    """The offset after the last batch in `data` (header walk)."""
    data = bytes(data)
    pos, last = 0, None
    while pos < len(data):
        header = parse_header(data, pos)
        last = header
        pos += header.size_in_bytes
    return last.next_offset


def segment_files(path) -> list[str]:
    return sorted(name for name in os.listdir(path)
                  if name.endswith((".log", ".index", ".timeindex")) or ".log." in name)


def resealed(data: bytes, *, attributes: int | None = None) -> bytes:
    """`data` (one batch) with the given attributes and its CRC recomputed."""
    damaged = bytearray(data)
    if attributes is not None:
        damaged[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big")
    damaged[CRC_OFFSET : CRC_OFFSET + 4] = compute_crc(damaged).to_bytes(4, "big")
    return bytes(damaged)


def misframed(count: int = 2, *, base_offset: int = 0) -> bytes:
    """A batch with a right CRC whose first record's length says one byte more than it has."""
    data = bytearray(batch(count, base_offset=base_offset))
    data[HEADER_SIZE] += 2  # the zigzag varint of the length: +1
    return resealed(bytes(data))
