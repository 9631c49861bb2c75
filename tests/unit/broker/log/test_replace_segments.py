"""Log.replace_segments: the .cleaned -> .swap -> final protocol, and recovery after a crash at any step."""

from __future__ import annotations

import os

import pytest

from services.broker.log import LogSegment

from .support import batch, batches_in, config, manual_clock, open_log, read_all

ONE = len(batch(2))
PER_SEGMENT = 3


class Crash(BaseException):
    """Stands for the process dying: nothing in the storage engine catches it."""


def source_log(path):
    """Segments at 0, 6, 12, 18 (three 2-record batches each) and an active segment at 24."""
    cfg = config(segment_bytes=PER_SEGMENT * ONE, index_interval_bytes=1)
    log = open_log(path, cfg)
    for _ in range(4 * PER_SEGMENT + 1):
        log.append_as_leader(batch(2), 0)
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18, 24]
    return log, cfg


def cleaned(log, cfg, groups):
    """New `.cleaned` segments: for each group of old segments, their even-numbered batches."""
    new = []
    for group in groups:
        first = group[0]
        segment = LogSegment.open(log.dir, first.base_offset, cfg, manual_clock(), suffix=".cleaned")
        for old in group:
            data = bytes(old.read(old.base_offset, 10**6).records)
            for base, last in batches_in(data):
                if (base // 2) % 2 == 0:
                    position = old.translate_offset(base)
                    segment.append(last, 0, last, old.log.read(*position))
        new.append(segment)
    return new


def expected_offsets(replaced_bases):
    offsets = []
    for base in range(0, 26, 2):
        segment_base = base - base % 6
        if segment_base in replaced_bases and (base // 2) % 2 == 1:
            continue
        offsets.extend([base, base + 1])
    return offsets


def leftovers(path):
    return [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap", ".deleted"))]


def test_replace_one_group(tmp_path):
    log, cfg = source_log(tmp_path / "t-0")
    old = log.segments[0:2]
    new = cleaned(log, cfg, [old])
    held = log.segments[1]  # a reader may still hold an old segment
    log.replace_segments(new, old)
    assert [s.base_offset for s in log.segments] == [0, 12, 18, 24]
    assert read_all(log) == expected_offsets({0, 6})
    assert batches_in(held.read(6, 10**6).records)[0] == (6, 7)
    assert not leftovers(log.dir)
    log.append_as_leader(batch(1), 0)
    log.flush()
    log.close()
    reopened = open_log(log.dir, cfg, recovery_point=0)
    assert read_all(reopened) == expected_offsets({0, 6}) + [26]


def test_the_active_segment_cannot_be_replaced(tmp_path):
    log, cfg = source_log(tmp_path / "t-0")
    with pytest.raises(ValueError):
        log.replace_segments(cleaned(log, cfg, [[log.active_segment]]), [log.active_segment])


def count_renames(monkeypatch) -> list[int]:
    calls = [0]
    real = os.rename

    def counting(src, dst):
        calls[0] += 1
        real(src, dst)

    monkeypatch.setattr(os, "rename", counting)
    return calls


def crash_after(monkeypatch, renames: int) -> None:
    real = os.rename
    done = [0]

    def crashing(src, dst):
        if done[0] >= renames:
            raise Crash(f"crashed before renaming {src}")
        done[0] += 1
        real(src, dst)

    monkeypatch.setattr(os, "rename", crashing)


@pytest.mark.parametrize("groups", [[[0, 6]], [[0], [6, 12]]], ids=["one-new", "two-new"])
def test_a_crash_at_any_step_is_completed_or_rolled_back(tmp_path, monkeypatch, groups):
    with monkeypatch.context() as m:
        log, cfg = source_log(tmp_path / "probe-0")
        by_base = {s.base_offset: s for s in log.segments}
        calls = count_renames(m)
        log.replace_segments(cleaned(log, cfg, [[by_base[b] for b in g] for g in groups]),
                             [by_base[b] for g in groups for b in g])
        total = calls[0]
    replaced = {b for g in groups for b in g}
    commit_point = 3 * len(groups)  # every new segment's three files renamed to .swap
    assert total == 3 * len(groups) + 3 * len(replaced) + 3 * len(groups)
    for renames in range(total):
        path = tmp_path / f"c{renames}-0"
        log, cfg = source_log(path)
        by_base = {s.base_offset: s for s in log.segments}
        new = cleaned(log, cfg, [[by_base[b] for b in g] for g in groups])
        with monkeypatch.context() as m:
            crash_after(m, renames)
            with pytest.raises(Crash):
                log.replace_segments(new, [by_base[b] for g in groups for b in g])
        reopened = open_log(path, cfg, recovery_point=0)  # the process restarts
        expected = expected_offsets(replaced if renames >= commit_point else set())
        assert read_all(reopened) == expected, f"after {renames} renames"
        assert reopened.log_end_offset == 26
        assert not leftovers(path), f"after {renames} renames: {leftovers(path)}"
        bases = [s.base_offset for s in reopened.segments]
        assert bases == sorted(bases) and bases[-1] == 24
        reopened.append_as_leader(batch(1), 0)
        assert read_all(reopened)[-1] == 26
