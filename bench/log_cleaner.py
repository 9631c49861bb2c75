"""Throughput of log compaction next to a plain Python dict dedupe of the same records.

A compacted log of ~256 MiB (16 MiB segments, batches of 100 records with 16-byte keys and 100-byte
values, uncompressed) is written once; 10% of the keys are live, each written ten times in random
order. Then, alternately and several times, on a fresh copy of that log:

    cleaner  LogCleaner.clean_log: header scan, offset map of the dirty section, rewrite of every
             segment into `.cleaned` segments (fsynced), crash-safe swap
    peer     read every segment file, decode every batch (`decode_columns`) and keep the last
             (offset, value) per key in a dict: the dedupe alone, nothing written

Both are measured in MB of log processed per second and records per second; the best run of each
is reported with the ratio cleaner / peer. The copies are made before the clock starts.

    python bench/log_cleaner.py [--dir DIR] [--mib 256] [--rounds 2] [--live 0.1]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.broker.log import Log, LogConfig  # noqa: E402
from services.broker.log.cleaner import CleanerConfig, LogCleaner  # noqa: E402
from services.common.clock import SYSTEM_CLOCK  # noqa: E402
from services.common.records import build_batch, decode_columns  # noqa: E402

MIB = 1 << 20
RECORDS_PER_BATCH = 100
VALUE_BYTES = 100
SEGMENT_BYTES = 16 * MIB
READ_BYTES = 8 * MIB


def log_config() -> LogConfig:
    return LogConfig(cleanup_policy=("compact",), segment_bytes=SEGMENT_BYTES, file_delete_delay_ms=0)


def write_log(path: str, volume: int, live: float, seed: int = 7) -> tuple[int, int]:
    """Writes the source log; returns (records, distinct keys)."""
    rnd = random.Random(seed)
    value = bytes(rnd.getrandbits(8) for _ in range(VALUE_BYTES))
    probe = build_batch([value] * RECORDS_PER_BATCH, [b"k" * 16] * RECORDS_PER_BATCH, timestamps=0)
    batches = max(volume // len(probe), 1)
    records = batches * RECORDS_PER_BATCH
    keys = max(int(records * live), 1)
    log = Log(path, log_config(), clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.time_ms()
    for _ in range(batches):
        chosen = [b"key-%012d" % rnd.randrange(keys) for _ in range(RECORDS_PER_BATCH)]
        log.append_as_leader(build_batch([value] * RECORDS_PER_BATCH, chosen, timestamps=now), 0)
    log.roll()
    log.flush()
    log.close()
    return records, keys


def open_copy(source: str, target: str) -> Log:
    shutil.copytree(source, target)
    log = Log(target, log_config(), clock=SYSTEM_CLOCK, had_clean_shutdown=True)
    log.update_high_watermark(log.log_end_offset)
    return log


def run_cleaner(log: Log) -> tuple[float, int, int]:
    """Seconds, bytes cleaned, bytes left."""
    cleaner = LogCleaner(CleanerConfig(), [log.parent_dir], lambda: {log.topic_partition: log}, SYSTEM_CLOCK)
    size = log.size_in_bytes
    start = time.perf_counter()
    end = cleaner.clean_log(log)
    elapsed = time.perf_counter() - start
    assert end == log.active_segment.base_offset, (end, log.active_segment.base_offset)
    return elapsed, size, log.size_in_bytes


def run_peer(path: str) -> tuple[float, int, int]:
    """Seconds, bytes read, keys kept."""
    names = sorted(n for n in os.listdir(path) if n.endswith(".log"))
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    total = 0
    start = time.perf_counter()
    for name in names:
        with open(os.path.join(path, name), "rb") as f:
            rest = b""
            while chunk := f.read(READ_BYTES):
                data = rest + chunk
                end = whole_batches(data)
                columns = decode_columns(memoryview(data)[:end])
                latest.update(zip(columns.keys, zip(columns.offsets, columns.values, strict=True), strict=True))
                total += end
                rest = data[end:]
    elapsed = time.perf_counter() - start
    return elapsed, total, len(latest)


def whole_batches(data: bytes) -> int:
    pos = 0
    while len(data) - pos >= 12:
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        if pos + size > len(data):
            break
        pos += size
    return pos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where to put the files (default: a temp dir)")
    parser.add_argument("--mib", type=int, default=256, help="size of the log")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--live", type=float, default=0.1, help="distinct keys / records")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir)
    try:
        source = os.path.join(work, "source-0")
        started = time.perf_counter()
        records, keys = write_log(source, args.mib * MIB, args.live)
        print(f"python {sys.version.split()[0]}, files in {work}; wrote {records:,} records over {keys:,} "
              f"keys in {time.perf_counter() - started:.1f} s; best of {args.rounds} alternating runs")
        best_cleaner = best_peer = None
        for round_no in range(args.rounds):
            log = open_copy(source, os.path.join(work, f"copy{round_no}-0"))
            seconds, size, left = run_cleaner(log)
            log.close()
            shutil.rmtree(log.dir)
            if best_cleaner is None or seconds < best_cleaner[0]:
                best_cleaner = (seconds, size, left)
            seconds, total, kept = run_peer(source)
            assert kept <= keys, (kept, keys)
            if best_peer is None or seconds < best_peer[0]:
                best_peer = (seconds, total, kept)
        seconds, size, left = best_cleaner
        cleaner_mbps, cleaner_rps = size / seconds / 1e6, records / seconds
        print(f"  cleaner  {size / MIB:6.0f} MiB in {seconds:6.2f} s   {cleaner_mbps:6.1f} MB/s   "
              f"{cleaner_rps / 1e6:5.2f} M records/s   ({left / MIB:.1f} MiB left)")
        seconds, total, kept = best_peer
        peer_mbps, peer_rps = total / seconds / 1e6, records / seconds
        print(f"  peer     {total / MIB:6.0f} MiB in {seconds:6.2f} s   {peer_mbps:6.1f} MB/s   "
              f"{peer_rps / 1e6:5.2f} M records/s   ({kept:,} keys)")
        print(f"  ratio cleaner / peer: {cleaner_mbps / peer_mbps:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
