"""Throughput of the broker's storage engine next to plain Python file I/O on the same disk.

For 16 KiB and 1 MiB record batches it measures, in one run and on one temp directory:

    append   Log.append_as_leader of one batch per call (validation with CRC-32C, offset
             assignment, index upkeep, one pwritev) versus a buffered `file.write` of the same bytes
    read     Log.read(offset, 1 MiB) from the first offset to the end (index lookup, header walk,
             one pread) versus `file.read(1 MiB)` of a file of the same bytes

Both sides write the same volume and neither fsyncs. The log is created, and its first batch
appended (which writes the leader-epoch checkpoint with two fsyncs), before the clock starts.
After a warm-up the sides run alternately several times, taking turns at going first (the second
writer meets the first one's write-back), and the best run of each is reported, so the page cache
affects both alike. For 16 KiB batches it also shows appends of 64 batches per
call (as a follower appends). Then a ~1 GiB log (default segment size) is left without a clean
shutdown and reopened, which re-validates every batch (CRC included) and rebuilds its indexes.
Last, index lookups: the same random targets looked up in a full `OffsetIndex` (by offset and by
position) and `TimeIndex` (by timestamp) of `--index-entries` entries, all in the file, versus
`bisect` over a Python list of the same keys, best of `--rounds`; the ratio is index time over
bisect time (1.0 would be as fast as bisect).

    python bench/log_append.py [--dir DIR] [--rounds N] [--small-mib 128] [--large-mib 512]
                               [--index-entries 100000] [--index-lookups 200000] [--only-index]
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.broker.log import Log, LogConfig, OffsetIndex, TimeIndex  # noqa: E402
from services.common.clock import SYSTEM_CLOCK  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.records.batch import set_base_offset  # noqa: E402

MIB = 1 << 20
READ_BYTES = MIB
TARGETS = {"append": {16 * 1024: 0.5, MIB: 0.8}, "read": {16 * 1024: 0.8, MIB: 0.8}}


def make_batch(size: int) -> bytes:
    """One valid batch of exactly `size` bytes holding a single random record."""
    payload = 8
    while True:
        batch = build_batch([os.urandom(payload)], timestamps=SYSTEM_CLOCK.time_ms())
        if len(batch) == size:
            return batch
        payload += size - len(batch)


def plain_write(path: str, batch: bytes, count: int) -> float:
    start = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(count):
            f.write(batch)
    return time.perf_counter() - start


def log_append(log_dir: str, batch: bytes, count: int) -> tuple[float, Log]:
    log = Log(log_dir, LogConfig(), clock=SYSTEM_CLOCK)
    append = log.append_as_leader
    append(batch, 0)  # the first append also writes the leader-epoch checkpoint (two fsyncs)
    start = time.perf_counter()
    for _ in range(count - 1):
        append(batch, 0)
    elapsed = time.perf_counter() - start
    return elapsed * count / (count - 1), log


def log_append_runs(log_dir: str, batch: bytes, count: int, per_call: int) -> float:
    """Follower-style appends of `per_call` batches with their offsets already set."""
    log = Log(log_dir, LogConfig(), clock=SYSTEM_CLOCK)
    runs, offset = [], 0
    for _ in range(count // per_call):
        run = bytearray()
        for _ in range(per_call):
            piece = bytearray(batch)
            set_base_offset(piece, offset)
            run += piece
            offset += 1
        runs.append(bytes(run))
    log.append_as_follower(runs[0])
    start = time.perf_counter()
    for run in runs[1:]:
        log.append_as_follower(run)
    elapsed = time.perf_counter() - start
    log.close()
    shutil.rmtree(log_dir)
    return elapsed * len(runs) / (len(runs) - 1)


def plain_read(path: str) -> tuple[float, int]:
    total = 0
    start = time.perf_counter()
    with open(path, "rb") as f:
        while chunk := f.read(READ_BYTES):
            total += len(chunk)
    return time.perf_counter() - start, total


def log_read(log: Log, batch_size: int) -> tuple[float, int]:
    # Every batch holds one record, so the next offset is the batch count; a consumer would take
    # it from the last batch header, which is kept out of the measurement.
    total, offset, end = 0, 0, log.log_end_offset
    read = log.read
    start = time.perf_counter()
    while offset < end:
        records = read(offset, READ_BYTES).records
        total += len(records)
        offset += len(records) // batch_size
    return time.perf_counter() - start, total


def warm_up(path: str, volume: int) -> None:
    """Writes and removes `volume` bytes so both sides start on page cache pages already in use."""
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for _ in range(volume // MIB):
            f.write(block)
    os.unlink(path)


def compare(work: str, batch_size: int, volume: int, rounds: int) -> dict[str, tuple[float, float]]:
    batch = make_batch(batch_size)
    count = volume // batch_size
    volume = count * batch_size
    plain_path = os.path.join(work, "plain.bin")
    warm_up(plain_path, volume)
    best = {"plain_write": float("inf"), "log_append": float("inf"), "log_append_64": float("inf"),
            "plain_read": float("inf"), "log_read": float("inf")}
    for round_no in range(rounds):
        log_dir = os.path.join(work, f"bench-{round_no}")
        # the side that writes second meets the first side's write-back: take turns going first
        if round_no % 2 == 0:
            best["plain_write"] = min(best["plain_write"], plain_write(plain_path, batch, count))
            elapsed, log = log_append(log_dir, batch, count)
        else:
            elapsed, log = log_append(log_dir, batch, count)
            best["plain_write"] = min(best["plain_write"], plain_write(plain_path, batch, count))
        best["log_append"] = min(best["log_append"], elapsed)
        for _ in range(2):
            elapsed, total = plain_read(plain_path)
            assert total == volume
            best["plain_read"] = min(best["plain_read"], elapsed)
            elapsed, total = log_read(log, batch_size)
            assert total == volume, (total, volume)
            best["log_read"] = min(best["log_read"], elapsed)
        log.close()
        shutil.rmtree(log_dir)
        if batch_size < MIB:
            best["log_append_64"] = min(best["log_append_64"],
                                        log_append_runs(log_dir, batch, count, 64))
        os.unlink(plain_path)
    return {name: (volume / seconds / 1e6, seconds) for name, seconds in best.items()}


def recovery(work: str, batch_size: int, volume: int) -> tuple[float, float, int]:
    """Seconds and MB/s to reopen a log of `volume` bytes after an unclean shutdown."""
    log_dir = os.path.join(work, "recover-0")
    batch = make_batch(batch_size)
    log = Log(log_dir, LogConfig(), clock=SYSTEM_CLOCK)
    for _ in range(volume // batch_size):
        log.append_as_leader(batch, 0)
    end = log.log_end_offset
    size = log.size_in_bytes
    log.close_handlers()  # no flush, no trimming, no clean-shutdown marker: as after a crash
    start = time.perf_counter()
    reopened = Log(log_dir, LogConfig(), clock=SYSTEM_CLOCK, recovery_point=0, had_clean_shutdown=False)
    elapsed = time.perf_counter() - start
    assert reopened.log_end_offset == end, (reopened.log_end_offset, end)
    reopened.close()
    shutil.rmtree(log_dir)
    return elapsed, size / elapsed / 1e6, size


def _seconds(fn, targets: list[int]) -> float:
    start = time.perf_counter()
    for target in targets:
        fn(target)
    return time.perf_counter() - start


def index_lookups(work: str, entries: int, lookups: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Seconds per lookup in the indexes and with `bisect` over lists, by lookup kind."""
    offsets = [i * 7 for i in range(entries)]
    positions = [i * 4096 for i in range(entries)]
    timestamps = [1_600_000_000_000 + i * 3 for i in range(entries)]
    offset_index = OffsetIndex(os.path.join(work, "lookup.index"), 0, entries * OffsetIndex.ENTRY_SIZE)
    time_index = TimeIndex(os.path.join(work, "lookup.timeindex"), 0, (entries + 1) * TimeIndex.ENTRY_SIZE)
    for offset, position, timestamp in zip(offsets, positions, timestamps, strict=True):
        offset_index.append(offset, position)
        time_index.maybe_append(timestamp, offset)
    offset_index.flush()
    time_index.flush()
    rng = random.Random(42)

    def targets(keys: list[int]) -> list[int]:
        return [rng.randrange(keys[0] - 1, keys[-1] + 2) for _ in range(lookups)]

    def bisect_lookup(keys: list[int], values: list[int]):
        def lookup(target: int):
            slot = bisect.bisect_right(keys, target) - 1
            return (keys[slot], values[slot]) if slot >= 0 else None
        return lookup

    kinds = (("offset", offset_index.lookup, offsets, positions),
             ("position", offset_index.lookup_by_position, positions, positions),
             ("timestamp", time_index.lookup, timestamps, offsets))
    result = {}
    for kind, index_lookup, keys, values in kinds:
        wanted, plain_lookup = targets(keys), bisect_lookup(keys, values)
        index_s = bisect_s = float("inf")
        for _ in range(rounds):  # alternating, so both sides meet the same load
            index_s = min(index_s, _seconds(index_lookup, wanted))
            bisect_s = min(bisect_s, _seconds(plain_lookup, wanted))
        result[kind] = (index_s / lookups, bisect_s / lookups)
    offset_index.close()
    time_index.close()
    return result


def print_index_lookups(work: str, entries: int, lookups: int, rounds: int) -> None:
    print(f"index lookups, {entries} entries, {lookups} random targets, best of {rounds}")
    for kind, (index_s, bisect_s) in index_lookups(work, entries, lookups, rounds).items():
        print(f"  by {kind:9s}  index {index_s * 1e6:6.2f} us   bisect {bisect_s * 1e6:6.2f} us   "
              f"ratio {index_s / bisect_s:4.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where to put the files (default: a temp dir)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small-mib", type=int, default=128, help="volume for 16 KiB batches")
    parser.add_argument("--large-mib", type=int, default=512, help="volume for 1 MiB batches")
    parser.add_argument("--recovery-mib", type=int, default=1024)
    parser.add_argument("--index-entries", type=int, default=100_000)
    parser.add_argument("--index-lookups", type=int, default=200_000)
    parser.add_argument("--only-index", action="store_true", help="run the index lookups alone")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir)
    print(f"python {sys.version.split()[0]}, files in {work}, best of {args.rounds} alternating runs")
    failures = []
    try:
        if args.only_index:
            print_index_lookups(work, args.index_entries, args.index_lookups, args.rounds)
            return 0
        for batch_size, mib in ((16 * 1024, args.small_mib), (MIB, args.large_mib)):
            result = compare(work, batch_size, mib * MIB, args.rounds)
            label = f"{batch_size // 1024} KiB batches" if batch_size < MIB else "1 MiB batches"
            print(f"\n{label}, {mib} MiB per run")
            for kind, log_name, plain_name in (("append", "log_append", "plain_write"),
                                               ("read", "log_read", "plain_read")):
                log_mbps, plain_mbps = result[log_name][0], result[plain_name][0]
                ratio = log_mbps / plain_mbps
                target = TARGETS[kind][batch_size]
                verdict = "ok" if ratio >= target else "BELOW TARGET"
                if ratio < target:
                    failures.append(f"{kind} {label}")
                print(f"  {kind:6s}  log {log_mbps:8.0f} MB/s   plain {plain_mbps:8.0f} MB/s   "
                      f"ratio {ratio:4.2f}  (target >= {target})  {verdict}")
            if batch_size < MIB:
                mbps = result["log_append_64"][0]
                print(f"  append, 64 batches per call (follower)  {mbps:8.0f} MB/s   "
                      f"ratio {mbps / result['plain_write'][0]:4.2f}")
        print()
        for batch_size in (16 * 1024, MIB):
            seconds, mbps, size = recovery(work, batch_size, args.recovery_mib * MIB)
            print(f"recovery of a {size / MIB:.0f} MiB log of {batch_size // 1024} KiB batches after an "
                  f"unclean shutdown: {seconds:.2f} s, {mbps:.0f} MB/s")
        print()
        print_index_lookups(work, args.index_entries, args.index_lookups, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("\nbelow target: " + ", ".join(failures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
