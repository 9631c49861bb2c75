"""Checkpoint files in Kafka's text format; this module is their only reader and writer.

Every checkpoint is UTF-8 text, one item per line, fields separated by one space:

    0                       format version
    N                       number of entries
    <entry 1>
    ...
    <entry N>

Entry formats:

    recovery-point-offset-checkpoint   `topic partition offset`   per log dir (LogManager): offsets
    log-start-offset-checkpoint        `topic partition offset`   below which a log needs no recovery,
    replication-offset-checkpoint      `topic partition offset`   log start offsets, high watermarks
    cleaner-offset-checkpoint          `topic partition offset`   per log dir (LogCleanerManager):
                                                                  where each dirty section starts
    leader-epoch-checkpoint            `epoch startOffset`        per partition dir (LeaderEpochFileCache)

Writes are atomic: `<file>.tmp` is written and fsynced, renamed over the file and the directory
fsynced, so a crash leaves either the old or the new checkpoint. Writing the entries the file was
last read or written with does nothing (an idle broker checkpoints thousands of unchanged high watermarks
every few seconds). A missing or empty file reads as no entries; a malformed one raises
`CheckpointError`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from services.broker.log.files import atomic_write
from services.common.topic_partition import TopicPartition

CURRENT_VERSION = 0


class CheckpointError(OSError):
    """A checkpoint file that cannot be parsed."""


class EpochEntry(NamedTuple):
    """The first offset written in a leader epoch."""

    epoch: int
    start_offset: int


class _CheckpointFile:
    """Reads and writes the version/count/lines framing; subclasses format one entry."""

    FIELDS: int

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._written: list | None = None  # the entries this object last wrote to `path`

    def _format(self, entry) -> str:
        raise NotImplementedError

    def _parse(self, fields: list[str]):
        raise NotImplementedError

    def _write_entries(self, entries: list) -> None:
        with self._lock:
            if entries == self._written:
                return
            lines = [str(CURRENT_VERSION), str(len(entries))]
            lines.extend(self._format(entry) for entry in entries)
            self._written = None
            atomic_write(self.path, ("\n".join(lines) + "\n").encode())
            self._written = entries

    def _read_entries(self) -> list:
        with self._lock:
            try:
                with open(self.path, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                return []
        lines = text.splitlines()
        if not lines:
            return []
        try:
            version = int(lines[0].strip())
        except ValueError:
            raise CheckpointError(f"malformed version line {lines[0]!r} in {self.path}") from None
        if version != CURRENT_VERSION:
            raise CheckpointError(f"unrecognized version {version} of checkpoint file {self.path}")
        if len(lines) < 2:
            raise CheckpointError(f"checkpoint file {self.path} has no entry count")
        try:
            expected = int(lines[1].strip())
        except ValueError:
            raise CheckpointError(f"malformed entry count {lines[1]!r} in {self.path}") from None
        entries = []
        for line in lines[2:]:
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != self.FIELDS:
                raise CheckpointError(f"malformed line {line!r} in checkpoint file {self.path}")
            try:
                entries.append(self._parse(fields))
            except ValueError:
                raise CheckpointError(f"malformed line {line!r} in checkpoint file {self.path}") from None
        if len(entries) != expected:
            raise CheckpointError(f"expected {expected} entries in {self.path} but found {len(entries)}")
        with self._lock:
            self._written = list(entries)  # what the file holds: writing it again changes nothing
        return entries

    def update_dir(self, new_dir: str) -> None:
        with self._lock:
            self.path = os.path.join(new_dir, os.path.basename(self.path))
            self._written = None


class OffsetCheckpointFile(_CheckpointFile):
    """`topic partition offset` entries: recovery points, log start offsets or high watermarks."""

    FIELDS = 3

    def _format(self, entry: tuple[TopicPartition, int]) -> str:
        tp, offset = entry
        return f"{tp.topic} {tp.partition} {offset}"

    def _parse(self, fields: list[str]) -> tuple[TopicPartition, int]:
        return TopicPartition(fields[0], int(fields[1])), int(fields[2])

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._write_entries(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._read_entries())


class LeaderEpochCheckpointFile(_CheckpointFile):
    """`epoch startOffset` entries, in increasing order of both."""

    FIELDS = 2

    def _format(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def _parse(self, fields: list[str]) -> EpochEntry:
        return EpochEntry(int(fields[0]), int(fields[1]))

    def write(self, entries: Iterable[EpochEntry]) -> None:
        self._write_entries(list(entries))

    def read(self) -> list[EpochEntry]:
        return self._read_entries()
