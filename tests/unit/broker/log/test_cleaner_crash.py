"""A crash at any step of a clean: after a restart every group of segments is all old or all new, and
nothing is lost."""

from __future__ import annotations

import os

import pytest

from services.broker.log import Log
from services.broker.log.compactor import group_segments_by_size
from services.broker.log.file_records import FileRecords

from .cleaner_support import cleaner_for, compact_config, keyed, leftovers, open_compacted, records_of


class Crash(BaseException):
    """Stands for the process dying: nothing in the storage engine catches it."""


CFG = compact_config(segment_bytes=1024, index_interval_bytes=100)


def build(path) -> Log:
    """The same log every time: segments of ~10 records over 6 keys, some tombstones, and an active one."""
    log = open_compacted(path, CFG)
    for i in range(70):
        value = None if i % 11 == 5 else b"%04d" % i + b"v" * 40
        log.append_as_leader(keyed([(b"key-%d" % (i % 6), value)]), 0)
    log.update_high_watermark(log.log_end_offset)
    return log


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(records before, records after a clean, group start offsets, end offset)."""
    log = build(tmp_path_factory.mktemp("ref") / "t-0")
    before = records_of(log)
    segments = log.segments
    groups = group_segments_by_size(segments[:-1], CFG.segment_bytes, CFG.segment_index_bytes,
                                    segments[-1].base_offset)
    end = cleaner_for([log]).clean_log(log)
    assert len(groups) > 3
    return before, records_of(log), [g[0].base_offset for g in groups] + [end], log.log_end_offset


def assert_old_or_new_per_group(records, reference):
    before, after, boundaries, _ = reference
    splits = [[r for r in after if r[0] < b] + [r for r in before if r[0] >= b] for b in boundaries]
    assert records in splits, f"not group-wise old or new: {records}"


def restart_and_check(path, reference):
    reopened = open_compacted(path, CFG, recovery_point=0)  # no clean shutdown
    assert not leftovers(path)
    assert_old_or_new_per_group(records_of(reopened), reference)
    assert reopened.log_end_offset == reference[3]
    reopened.update_high_watermark(reopened.log_end_offset)
    cleaner_for([reopened]).clean_log(reopened)
    assert records_of(reopened) == reference[1]
    reopened.append_as_leader(keyed([(b"key-0", b"after")]), 0)
    assert records_of(reopened)[-1] == (reference[3], b"key-0", b"after")
    reopened.close()


def count_renames(monkeypatch, path) -> int:
    calls = [0]
    real = os.rename

    def counting(src, dst):
        calls[0] += 1
        real(src, dst)

    with monkeypatch.context() as m:
        m.setattr(os, "rename", counting)
        log = build(path)
        cleaner_for([log]).clean_log(log)
    return calls[0]


def crash_after(renames: int):
    real, done = os.rename, [0]

    def crashing(src, dst):
        if done[0] >= renames:
            raise Crash(f"crashed before renaming {src}")
        done[0] += 1
        real(src, dst)

    return crashing


def test_a_crash_at_every_rename(tmp_path, monkeypatch, reference):
    total = count_renames(monkeypatch, tmp_path / "probe-0")
    assert total > 20
    for renames in range(total):
        path = tmp_path / f"c{renames}-0"
        log = build(path)
        with monkeypatch.context() as m:
            m.setattr(os, "rename", crash_after(renames))
            with pytest.raises(Crash):
                cleaner_for([log]).clean_log(log)
        restart_and_check(path, reference)


@pytest.mark.parametrize("group", [0, 1, 3])
def test_a_crash_with_a_written_cleaned_segment(tmp_path, monkeypatch, reference, group):
    path = tmp_path / "t-0"
    log = build(path)
    real, calls = Log.replace_segments, [0]

    def crashing(self, new, old):
        if calls[0] == group:
            raise Crash("crashed before the swap")
        calls[0] += 1
        real(self, new, old)

    with monkeypatch.context() as m:
        m.setattr(Log, "replace_segments", crashing)
        with pytest.raises(Crash):
            cleaner_for([log]).clean_log(log)
    assert any(n.endswith(".cleaned") for n in os.listdir(path))
    restart_and_check(path, reference)


def test_a_torn_write_of_a_cleaned_segment(tmp_path, monkeypatch, reference):
    path = tmp_path / "t-0"
    log = build(path)
    real = FileRecords.append

    def torn(self, records, size):
        if self.path.endswith(".cleaned"):
            data = b"".join(records) if isinstance(records, list) else bytes(records)
            real(self, data[: size // 2], size // 2)
            raise Crash("crashed while writing")
        return real(self, records, size)

    with monkeypatch.context() as m:
        m.setattr(FileRecords, "append", torn)
        with pytest.raises(Crash):
            cleaner_for([log]).clean_log(log)
    assert any(n.endswith(".log.cleaned") for n in os.listdir(path))
    restart_and_check(path, reference)
