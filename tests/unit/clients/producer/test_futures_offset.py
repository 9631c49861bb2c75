"""`FutureRecordMetadata.partition` and `offset()`: where a done record went, as its metadata says."""

from __future__ import annotations

import pytest

from services.clients.producer import KafkaTimeoutError
from services.clients.producer.batch import ProducerBatch
from services.common.errors import Errors, KafkaError


def batch_of(count: int) -> tuple[ProducerBatch, list]:
    batch = ProducerBatch("t", 3, 0, 0)
    futures = [batch.append(0, None, b"v%d" % i, None, None, 10) for i in range(count)]
    return batch, futures


def test_offsets_and_partition_match_the_metadata():
    batch, futures = batch_of(4)
    with pytest.raises(KafkaTimeoutError):
        futures[0].offset()
    batch.complete_range(0, 4, 100, -1, None)
    assert [(f.partition, f.offset()) for f in futures] == [(m.partition, m.offset) for m in
                                                             (f.get(0) for f in futures)]
    assert [f.offset() for f in futures] == [100, 101, 102, 103]


def test_a_failed_record_raises_its_error():
    batch, futures = batch_of(2)
    error = KafkaError("gone", error=Errors.NOT_LEADER_OR_FOLLOWER)
    batch.complete_range(0, 2, -1, -1, error)
    with pytest.raises(KafkaError):
        futures[1].offset()
