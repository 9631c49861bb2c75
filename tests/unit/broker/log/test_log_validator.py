"""The leader's LogValidator rules on batches whose CRC is right but whose content is not: unknown
codecs, codec flags on bytes of another codec, transactional or control batches without a producer
id, records whose offset deltas, timestamps or keys break Kafka's rules; each refused with Kafka's
error (and the index of the first offending record) and the log left as it was; a follower and log
recovery refusing a batch that fails the framing check."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker.log import CorruptRecordError, InvalidRecordError
from services.broker.log.validation import AppendOrigin
from services.common.errors import Errors, KafkaError
from services.common.records import Compression, build_batch, decode_batch
from services.common.records.batch import ATTRIBUTES_OFFSET
from services.common.records.builder import assemble_batch, encode_records

from .support import START_MS, batch, config, manual_clock, misframed, open_log, read_all, resealed


def assert_refused(log, data: bytes, code: int) -> None:
    end = log.log_end_offset
    with pytest.raises(Exception) as raised:
        log.append_as_leader(data, 0)
    assert getattr(raised.value, "code", None) == code, raised.value
    assert log.log_end_offset == end


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_an_unknown_codec_is_unsupported_compression(tmp_path, codec):
    log = open_log(tmp_path / "t-0")
    assert_refused(log, resealed(batch(2), attributes=codec), Errors.UNSUPPORTED_COMPRESSION_TYPE)
    assert_refused(log, batch(1) + resealed(batch(2), attributes=codec), Errors.UNSUPPORTED_COMPRESSION_TYPE)
    log.append_as_leader(batch(2), 0)
    assert read_all(log) == [0, 1]


@pytest.mark.parametrize("flag", list(Compression)[1:])
@pytest.mark.parametrize("actual", list(Compression))
def test_a_codec_flag_on_bytes_of_another_codec_is_corrupt(tmp_path, flag, actual):
    if flag == actual:
        return
    log = open_log(tmp_path / "t-0")
    data = build_batch([b"v" * 40, b"w" * 7], timestamps=START_MS, compression=actual)
    assert_refused(log, resealed(data, attributes=int(flag)), Errors.CORRUPT_MESSAGE)
    assert read_all(log) == []


@pytest.mark.parametrize("transactional, control", [(True, False), (False, True)])
def test_transactional_or_control_batches_need_a_producer_id(tmp_path, transactional, control):
    log = open_log(tmp_path / "t-0")
    data = assemble_batch(encode_records([b"x"]), records_count=1, last_offset_delta=0,
                          base_timestamp=START_MS, max_timestamp=START_MS,
                          is_transactional=transactional, is_control=control)
    assert_refused(log, data, Errors.INVALID_RECORD)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(data, 0, origin=AppendOrigin.COORDINATOR)


def refused(log, data: bytes, code: int, index: int | None = None, message: str = "") -> None:
    """`data` is refused alone and after a good batch, with `code` and the record error at `index`."""
    good = build_batch([b"g"], keys=[b"g"], timestamps=START_MS)
    for append in (data, good + data):
        end = log.log_end_offset
        with pytest.raises(KafkaError) as raised:
            log.append_as_leader(append, 0)
        assert raised.value.code == code, raised.value
        assert message in str(raised.value)
        if index is not None:
            assert raised.value.record_errors[0][0] == index
        assert log.log_end_offset == end


@pytest.mark.parametrize("deltas", [[0, 2, 2], [1, 1, 2], [0, 1, 5]])
def test_every_records_offset_delta_is_its_index(tmp_path, deltas):
    log = open_log(tmp_path / "t-0")
    data = assemble_batch(encode_records([b"a", b"b", b"c"], offset_deltas=deltas), records_count=3,
                          last_offset_delta=2, base_timestamp=START_MS, max_timestamp=START_MS)
    refused(log, data, Errors.INVALID_RECORD, index=[i for i, d in enumerate(deltas) if d != i][0])
    assert read_all(log) == []


def test_the_last_offset_delta_is_the_count_less_one_for_every_leader_append(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = assemble_batch(encode_records([b"a", b"b"]), records_count=2, last_offset_delta=2,
                          base_timestamp=START_MS, max_timestamp=START_MS)
    refused(log, data, Errors.INVALID_RECORD)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(data, 0, origin=AppendOrigin.COORDINATOR)


def test_the_max_timestamp_is_the_largest_record_timestamp(tmp_path):
    log = open_log(tmp_path / "t-0")
    section = encode_records([b"a", b"b"], timestamp_deltas=[0, 30])
    for max_timestamp in (START_MS, START_MS + 29, START_MS + 31):
        data = assemble_batch(section, records_count=2, last_offset_delta=1, base_timestamp=START_MS,
                              max_timestamp=max_timestamp)
        refused(log, data, Errors.INVALID_RECORD, message="max timestamp")
    log.append_as_leader(assemble_batch(section, records_count=2, last_offset_delta=1,
                                        base_timestamp=START_MS, max_timestamp=START_MS + 30), 0)
    assert read_all(log) == [0, 1]


def test_every_record_timestamp_is_within_the_difference_of_now(tmp_path):
    clock = manual_clock()
    log = open_log(tmp_path / "t-0", config(message_timestamp_difference_max_ms=1000), clock=clock)
    now = clock.time_ms()
    # the base and max timestamps are fine; the middle record is too old
    data = build_batch([b"a", b"b", b"c"], timestamps=[now, now - 5000, now + 10])
    refused(log, data, Errors.INVALID_TIMESTAMP, index=1)
    log.append_as_leader(build_batch([b"a", b"b"], timestamps=[now - 900, now + 900]), 0)
    assert read_all(log) == [0, 1]


def test_a_record_without_timestamp_does_not_hide_one_out_of_range(tmp_path):
    clock = manual_clock()
    log = open_log(tmp_path / "t-0", config(message_timestamp_difference_max_ms=1000), clock=clock)
    now = clock.time_ms()
    # the lowest timestamp is -1 (no timestamp, never checked), the highest is fine: the one between is not
    data = build_batch([b"a", b"b", b"c"], timestamps=[-1, now - 5000, now])
    refused(log, data, Errors.INVALID_TIMESTAMP, index=1)
    log.append_as_leader(build_batch([b"a", b"b"], timestamps=[-1, now]), 0)
    assert read_all(log) == [0, 1]


def test_a_compacted_topic_refuses_a_record_without_key(tmp_path):
    log = open_log(tmp_path / "t-0", config(cleanup_policy=("compact",)))
    data = build_batch([b"a", b"b", b"c"], keys=[b"k", None, b"k"], timestamps=START_MS)
    refused(log, data, Errors.INVALID_RECORD, index=1, message="Compacted topic cannot accept message without key")
    log.append_as_leader(build_batch([b"a", None], keys=[b"k", b"j"], timestamps=START_MS), 0)
    assert read_all(log) == [0, 1]
    plain = open_log(tmp_path / "u-0")
    plain.append_as_leader(data, 0)
    assert read_all(plain) == [0, 1, 2]


@pytest.mark.parametrize("codec", list(Compression)[1:])
def test_records_decompressing_past_the_topic_bound_are_message_too_large(tmp_path, codec):
    cfg = config(max_message_decompressed_bytes=5_000)
    log = open_log(tmp_path / "t-0", cfg)
    values = [b"\0" * 1_000] * 8  # 8 KiB of records in well under 100 bytes compressed
    bomb = build_batch(values, timestamps=START_MS, compression=codec)
    assert len(bomb) < cfg.max_message_bytes
    assert_refused(log, bomb, Errors.MESSAGE_TOO_LARGE)
    assert_refused(log, build_batch([b"x"], timestamps=START_MS) + bomb, Errors.MESSAGE_TOO_LARGE)
    log.append_as_leader(build_batch(values[:4], timestamps=START_MS, compression=codec), 0)
    assert read_all(log) == [0, 1, 2, 3]
    # a follower takes what its leader accepted under the bound in force then
    follower = open_log(tmp_path / "f-0", cfg)
    follower.append_as_follower(build_batch(values, timestamps=START_MS, compression=codec))
    assert read_all(follower) == list(range(8))


def test_a_follower_refuses_a_batch_that_fails_the_framing_check(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(batch(2))
    for damaged in (misframed(base_offset=2), batch(1, base_offset=2) + misframed(base_offset=3),
                    resealed(batch(1, base_offset=2), attributes=6)):
        with pytest.raises(CorruptRecordError):
            log.append_as_follower(damaged)
        assert log.log_end_offset == 2
    # what only a leader refuses, a follower takes: offset gaps left by compaction, keyless records
    compacted = build_batch([b"a", b"b"], offset_deltas=[0, 3], base_offset=2, timestamps=START_MS)
    log.append_as_follower(compacted)
    assert read_all(log) == [0, 1, 2, 5]


def test_recovery_cuts_the_log_at_the_first_batch_that_fails_the_framing_check(tmp_path):
    cfg = config(index_interval_bytes=1)
    log = open_log(tmp_path / "t-0", cfg)
    for _ in range(3):
        log.append_as_leader(batch(2), 0)
    path = log.active_segment.log.path
    log.close_handlers()  # a crash
    second = len(batch(2))
    with open(path, "r+b") as f:
        f.seek(second)
        f.write(misframed(base_offset=2))
    reopened = open_log(log.dir, cfg, recovery_point=0)
    assert reopened.log_end_offset == 2 and read_all(reopened) == [0, 1]
    assert os.path.getsize(path) == second


_RECORDS = encode_records([b"v" * 20, None, b"w"], keys=[b"k", b"key-2", None],
                          timestamp_deltas=[0, 7, 3], headers=[[("h", b"x")], None, [("i", None)]])


@settings(max_examples=400, deadline=None)
@given(codec=st.sampled_from(list(Compression)), before_compression=st.booleans(), data=st.data())
def test_whatever_the_leader_accepts_decodes_completely(codec, before_compression, data):
    """A valid batch of each codec, some of its bytes changed (in its records before compression,
    or anywhere after the CRC) and its CRC recomputed: if the leader takes it, every record decodes."""
    section = bytearray(_RECORDS)
    if before_compression:
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            section[data.draw(st.integers(0, len(section) - 1))] = data.draw(st.integers(0, 255))
    damaged = bytearray(assemble_batch(bytes(section), records_count=3, last_offset_delta=2,
                                       base_timestamp=START_MS, max_timestamp=START_MS + 7, compression=codec))
    if not before_compression:
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            damaged[data.draw(st.integers(ATTRIBUTES_OFFSET, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    damaged = resealed(bytes(damaged))
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(os.path.join(tmp, "t-0"))
        try:
            log.append_as_leader(damaged, 0)
        except KafkaError:
            assert log.log_end_offset == 0
            return
        stored = bytes(log.read(0, 1 << 20).records)
    header, records = decode_batch(stored)
    assert len(records) == header.records_count == log.log_end_offset
    assert [r.offset for r in records] == list(range(header.records_count))
