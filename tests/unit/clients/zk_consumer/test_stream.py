"""KafkaStream iteration over chunk queues, chunk decoding and fetcher ids, without threads."""

import json
import queue
import threading

import pytest

from services.clients.zk_consumer.errors import ConsumerTimeoutError, MessageDecodeError, MessageSizeTooLargeError
from services.clients.zk_consumer.fetcher import decode_chunk, fetcher_id
from services.clients.zk_consumer.stream import SHUTDOWN, KafkaStream, PartitionTopicInfo, enqueue
from services.common.records import build_batch, build_control_batch
from services.common.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def _info(offset=0, size=4):
    return PartitionTopicInfo(TP, queue.Queue(size), offset, offset, 1024)


def _batch(values, base_offset):
    return build_batch(values, base_offset=base_offset)


def test_decode_chunk_skips_earlier_records_and_control_batches_but_moves_past_them():
    data = _batch([b"a", b"b", b"c"], 10) + build_control_batch(True, producer_id=1, producer_epoch=0,
                                                                  base_offset=13)
    records, next_offset = decode_chunk(data, 11)
    assert [(offset, value) for offset, _key, value, _timestamp in records] == [(11, b"b"), (12, b"c")]
    assert next_offset == 14
    assert decode_chunk(b"", 5) == ([], 5)


def test_stream_hands_out_messages_and_moves_the_consumed_offset():
    info = _info(11)
    records, next_offset = decode_chunk(_batch([b"a", b"b", b"c"], 10), 10)
    assert enqueue(info, records, 10, next_offset, 1, threading.Event())
    assert info.fetched_offset == 13
    stream = KafkaStream(info.chunk_queue, 0)
    first = next(stream)
    assert (first.topic, first.partition, first.offset, first.message) == ("t", 0, 11, b"b")
    assert info.consumed_offset == 12
    assert next(stream).offset == 12 and info.consumed_offset == 13
    with pytest.raises(ConsumerTimeoutError):
        next(stream)
    info.chunk_queue.put(SHUTDOWN)
    assert list(stream) == []


def test_a_revoked_partition_neither_queues_nor_moves_offsets():
    info = _info(0)
    records, _ = decode_chunk(_batch([b"a", b"b"], 0), 0)
    enqueue(info, records, 0, 2, 1, threading.Event())
    stream = KafkaStream(info.chunk_queue, 0)
    assert next(stream).offset == 0
    info.revoke()
    with pytest.raises(ConsumerTimeoutError):
        next(stream)
    assert info.consumed_offset == 1
    assert not enqueue(info, records, 2, 4, 1, threading.Event())


def test_a_full_queue_blocks_until_stopped():
    info = _info(0, size=1)
    records, _ = decode_chunk(_batch([b"a"], 0), 0)
    stop = threading.Event()
    assert enqueue(info, records, 0, 1, 1, stop)
    stop.set()
    assert not enqueue(info, records, 1, 2, 1, stop, put_wait_s=0)
    assert info.fetched_offset == 1


def test_a_partial_message_is_reported_as_too_large():
    info = _info(0)
    assert enqueue(info, [], 0, 0, 100, threading.Event())
    with pytest.raises(MessageSizeTooLargeError) as caught:
        next(KafkaStream(info.chunk_queue, 0))
    assert caught.value.code == 10


def test_fetcher_id_spreads_partitions_like_kafka():
    assert fetcher_id(TopicPartition("t", 0), 1) == 0
    ids = {fetcher_id(TopicPartition("t", p), 3) for p in range(9)}
    assert ids == {0, 1, 2}


def test_decoders_turn_keys_and_values_and_leave_nulls_alone():
    info = _info(0)
    records = [(0, b"1", b'{"a": 1}', 5), (1, None, None, 6)]
    enqueue(info, records, 0, 2, 1, threading.Event())
    stream = KafkaStream(info.chunk_queue, 0, key_decoder=int, value_decoder=json.loads)
    assert next(stream)[3:] == (1, {"a": 1}, 5)
    assert next(stream)[3:] == (None, None, 6)


def test_a_failing_decoder_names_the_message_keeps_its_position_then_moves_on():
    info = _info(0)
    records = [(0, None, b"1", -1), (1, None, b"not json", -1), (2, None, b"3", -1)]
    enqueue(info, records, 0, 3, 1, threading.Event())
    stream = KafkaStream(info.chunk_queue, 0, value_decoder=json.loads)
    assert next(stream).message == 1
    with pytest.raises(MessageDecodeError, match="t-0 at offset 1") as caught:
        next(stream)
    assert caught.value.raw.message == b"not json" and caught.value.raw.offset == 1
    assert isinstance(caught.value.__cause__, ValueError)
    assert info.consumed_offset == 1  # a commit now resumes at the message that failed
    assert (next(stream).message, info.consumed_offset) == (3, 3)
