"""Crash safety of the storage engine: a child process appends through a LogManager until SIGKILL.

The child writes one line per acknowledged append (`first last seq`) to an ack file with a single
`os.write` after `append_as_leader` returned. After the kill, the log directory is optionally
damaged (a segment cut in the middle of a batch, or one byte of the last batch flipped) and opened
again: every complete, valid batch before the damage must be there with its content, nothing
acknowledged before the damage may be missing, and the next append must get the next offset.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
from pathlib import Path

import pytest

from services.broker.log import LogConfig, LogManager, LogManagerConfig
from services.broker.log.files import CLEAN_SHUTDOWN_FILE
from services.common.records import build_batch, iter_batches
from services.common.records.batch import parse_header
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import start_process, stop_process, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
TP = TopicPartition("crash", 0)
ACKS_BEFORE_KILL = 300
DEADLINE_S = 60.0

CHILD = r"""
import os, struct, sys
from services.broker.log import LogConfig, LogManager, LogManagerConfig
from services.common.topic_partition import TopicPartition
from services.common.records import build_batch

log_dir, ack_path, segment_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
manager = LogManager(
    LogManagerConfig(log_dirs=(log_dir,), log_flush_offset_checkpoint_interval_ms=20,
                     log_flush_start_offset_checkpoint_interval_ms=20),
    LogConfig(segment_bytes=segment_bytes, index_interval_bytes=1024),
    initial_task_delay_ms=0)
manager.startup()
log = manager.get_or_create_log(TopicPartition("crash", 0))
ack = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
seq = 0
while True:
    large = seq % 5 == 0  # a big write the kill may cut short
    count = 1 if large else 1 + seq % 7
    padding = 400_000 if large else 50 * (seq % 11)
    values = [struct.pack(">qi", seq, i) + bytes(padding) for i in range(count)]
    info = log.append_as_leader(build_batch(values, timestamps=1_600_000_000_000 + seq), 1)
    os.write(ack, f"{info.first_offset} {info.last_offset} {seq}\n".encode())
    seq += 1
"""


def manager_for(log_dir: Path, segment_bytes: int) -> LogManager:
    manager = LogManager(LogManagerConfig(log_dirs=(os.fspath(log_dir),)),
                         LogConfig(segment_bytes=segment_bytes, index_interval_bytes=1024))
    manager.startup()
    return manager


def read_acks(path: Path) -> list[tuple[int, int, int]]:
    if not path.exists():
        return []
    acks = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 3:
            acks.append(tuple(int(f) for f in fields))
    return acks


def run_child_until_killed(tmp_path: Path, segment_bytes: int) -> tuple[Path, list[tuple[int, int, int]]]:
    log_dir, ack_path = tmp_path / "logs", tmp_path / "acks"
    process = start_process([sys.executable, "-c", CHILD, os.fspath(log_dir), os.fspath(ack_path),
                             str(segment_bytes)], tmp_path / "child.log", cwd=REPO_ROOT)
    try:
        wait_until(lambda: len(read_acks(ack_path)) >= ACKS_BEFORE_KILL or process.poll() is not None,
                   DEADLINE_S, message=lambda: f"{ACKS_BEFORE_KILL} acks from the appending child")
        assert process.poll() is None, (tmp_path / "child.log").read_text()
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    finally:
        stop_process(process)  # reaps it whatever happened above
    assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    return log_dir, read_acks(ack_path)


def batch_bounds(segment: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of every whole batch in a segment file."""
    data = segment.read_bytes()
    bounds, pos = [], 0
    while len(data) - pos >= 61:
        header = parse_header(data, pos)
        if pos + header.size_in_bytes > len(data):
            break
        bounds.append((pos, header.size_in_bytes, header.base_offset))
        pos += header.size_in_bytes
    return bounds


def records_of(log) -> dict[int, bytes]:
    """Every record in the log by offset, decoded with CRC checks."""
    found, offset = {}, log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 4 << 20).records)
        assert data, f"no data at offset {offset} below the log end {log.log_end_offset}"
        for header, records in iter_batches(data):
            for record in records:
                found[record.offset] = record.value
            offset = header.next_offset
    return found


def verify(log_dir: Path, acks, segment_bytes: int, cutoff: int | None) -> None:
    """Reopens after the crash; checks contents, offsets, appends. `cutoff`: first damaged offset."""
    manager = manager_for(log_dir, segment_bytes)
    try:
        assert manager.had_clean_shutdown == {os.fspath(log_dir): False}
        log = manager.get_log(TP)
        records = records_of(log)
        end = log.log_end_offset
        assert sorted(records) == list(range(end)), "offsets must be contiguous from 0"
        acknowledged = [a for a in acks if cutoff is None or a[1] < cutoff]
        assert acknowledged, "the test needs acknowledged appends before the damage"
        for first, last, seq in acknowledged:
            for i, offset in enumerate(range(first, last + 1)):
                assert records[offset][:12] == struct.pack(">qi", seq, i), f"offset {offset}"
        if cutoff is None:
            assert end >= acks[-1][1] + 1  # an append in flight may have completed unacknowledged
        else:
            assert end == cutoff
        info = log.append_as_leader(build_batch([b"after"]), 2)
        assert info.first_offset == end
        log.flush()
    finally:
        manager.shutdown()
    again = manager_for(log_dir, segment_bytes)  # a clean restart keeps everything
    try:
        assert again.had_clean_shutdown == {os.fspath(log_dir): True}
        reopened = again.get_log(TP)
        assert reopened.log_end_offset == end + 1 and records_of(reopened)[end] == b"after"
    finally:
        again.shutdown()


def test_sigkill_while_appending_across_many_segments(tmp_path):
    segment_bytes = 1 << 20
    log_dir, acks = run_child_until_killed(tmp_path, segment_bytes)
    assert len(list((log_dir / "crash-0").glob("*.log"))) > 3
    verify(log_dir, acks, segment_bytes, cutoff=None)


@pytest.mark.parametrize("damage", ["cut-mid-batch", "flip-last-batch"])
def test_damage_after_sigkill_is_cut_off(tmp_path, damage):
    segment_bytes = 1 << 30  # one segment: nothing is flushed, so recovery reads all of it
    log_dir, acks = run_child_until_killed(tmp_path, segment_bytes)
    (segment,) = (log_dir / "crash-0").glob("*.log")
    bounds = batch_bounds(segment)
    if damage == "cut-mid-batch":
        position, size, cutoff = bounds[len(bounds) * 3 // 5]
        with open(segment, "r+b") as f:
            f.truncate(position + size // 2)
    else:
        position, size, cutoff = bounds[-1]
        with open(segment, "r+b") as f:
            f.seek(position + size - 3)
            byte = f.read(1)
            f.seek(position + size - 3)
            f.write(bytes([byte[0] ^ 0x01]))
    verify(log_dir, acks, segment_bytes, cutoff)
