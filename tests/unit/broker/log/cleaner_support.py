"""Shared pieces of the cleaner tests: compacted logs, keyed batches, reading records back, expectations."""

from __future__ import annotations

import os

from services.broker.log import Log, LogConfig
from services.broker.log.cleaner import CleanerConfig, LogCleaner
from services.common.records import build_batch, build_control_batch, iter_batches

from .support import START_MS, manual_clock

SMALL_MAP = 1 << 20


def compact_config(**overrides) -> LogConfig:
    settings = {"cleanup_policy": ("compact",), "segment_bytes": 1024, "index_interval_bytes": 1,
                "delete_retention_ms": 86_400_000, "file_delete_delay_ms": 0}
    settings.update(overrides)
    return LogConfig(**settings)


def open_compacted(path, cfg: LogConfig | None = None, clock=None, **kwargs) -> Log:
    return Log(os.fspath(path), cfg or compact_config(), clock=clock or manual_clock(), **kwargs)


def cleaner_for(logs, clock=None, **config) -> LogCleaner:
    """A LogCleaner over `logs` (a list of logs), checkpointing in their parent dirs."""
    logs = list(logs)
    dirs = sorted({log.parent_dir for log in logs})
    config.setdefault("dedupe_buffer_size", SMALL_MAP)
    return LogCleaner(CleanerConfig(**config), dirs, lambda: {log.topic_partition: log for log in logs},
                      clock or manual_clock())


def keyed(pairs, *, timestamp: int = START_MS, **kwargs) -> bytes:
    """One batch of (key, value) records; a value of None is a tombstone."""
    return build_batch([v for _, v in pairs], [k for k, _ in pairs], timestamps=timestamp, **kwargs)


def marker(commit: bool, producer_id: int, producer_epoch: int = 0, timestamp: int = START_MS) -> bytes:
    return build_control_batch(commit, producer_id=producer_id, producer_epoch=producer_epoch,
                               timestamp_ms=timestamp)


def all_batches(log: Log):
    """(header, records, raw bytes) of every batch of the log, in order (control batches too)."""
    found = []
    for segment in log.segments:
        data = segment.log.read(0, segment.size)
        pos = 0
        for header, records in iter_batches(data):
            found.append((header, records, data[pos:pos + header.size_in_bytes]))
            pos += header.size_in_bytes
    return found


def records_of(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record."""
    return [(r.offset, r.key, r.value) for header, records, _ in all_batches(log) if not header.is_control
            for r in records]


def latest_per_key(records, below: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """For every key, its last record below offset `below`, in offset order."""
    last = {}
    for offset, key, value in records:
        if offset < below and key is not None:
            last[key] = (offset, key, value)
    return sorted(last.values())


def expected_after_clean(records, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a clean up to `end` leaves: the latest record per key below it, everything from it on."""
    return latest_per_key(records, end) + [r for r in records if r[0] >= end]


def set_mtimes(log: Log, ms: int, segments=None) -> None:
    for segment in segments if segments is not None else log.segments[:-1]:
        segment.set_last_modified_ms(ms)


def leftovers(path) -> list[str]:
    return [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap", ".deleted"))]
