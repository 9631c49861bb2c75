"""A fetched batch that does not decode (a bad CRC; a sound CRC over a key length of -2, or over an
lz4 flag on bytes that are not lz4), served by a fake broker between two sound ones: poll() hands
out the records before it, then raises CorruptRecordError naming topic, partition and offset on
every poll until a seek moves past it, after which the records behind it come. The same through
`odradek console-consumer`, with and without --skip-message-on-error."""

from __future__ import annotations

import pytest

from services.clients import cli
from services.clients.consumer import Consumer, CorruptRecordError
from services.common.errors import Errors
from services.common.records import Compression, build_batch
from services.common.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, compute_crc, set_base_offset
from services.devcluster.proc import wait_until
from tests.unit.clients.consumer.test_consumer import TP, FakeLog, consumer_for, poll_values, serve
from tests.unit.test_record_reader import batch, record


def bad_crc_batch(base_offset: int) -> bytearray:
    corrupt = bytearray(build_batch([b"lost"], base_offset=base_offset))
    corrupt[-3] ^= 0xFF  # a value byte: the CRC no longer matches
    return corrupt


def negative_key_length_batch(base_offset: int) -> bytearray:
    corrupt = bytearray(batch(record(0, key=b"", key_length=-2), 1))  # header and CRC sound
    set_base_offset(corrupt, base_offset)  # not covered by the CRC
    return corrupt


def not_lz4_batch(base_offset: int) -> bytearray:
    corrupt = bytearray(batch(b"not lz4 at all", 1))
    corrupt[ATTRIBUTES_OFFSET + 1] |= Compression.LZ4  # the codec bits of the attributes' low byte
    corrupt[CRC_OFFSET:CRC_OFFSET + 4] = compute_crc(corrupt).to_bytes(4, "big")  # header and CRC sound
    set_base_offset(corrupt, base_offset)
    return corrupt


CORRUPT = {"bad CRC": bad_crc_batch, "key length -2": negative_key_length_batch,
           "lz4 flag on bytes that are not lz4": not_lz4_batch}


def log_with_corrupt_middle(kind: str) -> FakeLog:
    """Offsets 0-1 sound, 2 in a corrupt batch of one record, 3-4 sound."""
    log = FakeLog()
    log.append(b"a", b"b")
    log.batches.append(bytes(CORRUPT[kind](log.next_offset)))
    log.next_offset += 1
    log.append(b"d", b"e")
    return log


def poll_until_corrupt(consumer: Consumer, values: list[bytes]) -> CorruptRecordError:
    """Polls, gathering values, until a poll raises CorruptRecordError; returns it."""
    raised: list[CorruptRecordError] = []

    def failed() -> bool:
        try:
            values.extend(r.value for r in consumer.poll(timeout_ms=50))
        except CorruptRecordError as error:
            raised.append(error)
        return bool(raised)

    wait_until(failed, 30, 0, message=lambda: f"a CorruptRecordError (got {values})")
    return raised[0]


@pytest.mark.parametrize("kind", CORRUPT)
def test_poll_raises_at_the_corrupt_batch_until_a_seek_moves_past_it(fake_nodes, kind):
    (node,) = fake_nodes(1)
    serve(node, log_with_corrupt_middle(kind), [node], node)
    with consumer_for([node]) as consumer:
        consumer.assign([TP])
        values: list[bytes] = []
        error = poll_until_corrupt(consumer, values)
        assert values == [b"a", b"b"]  # the records before it came first
        assert (error.tp, error.topic, error.partition, error.offset, error.next_offset) == (TP, "t", 0, 2, 3)
        assert error.code == Errors.CORRUPT_MESSAGE and isinstance(error.__cause__, CorruptRecordError)
        assert "partition t-0 at offset 2" in str(error)
        assert consumer.position(TP) == 2
        with pytest.raises(CorruptRecordError, match="offset 2"):
            consumer.poll(timeout_ms=50)  # again: the position has not moved
        assert consumer.position(TP) == 2
        consumer.seek(TP, error.offset + 1)
        assert poll_values(consumer, 2) == [b"d", b"e"]


def test_a_fetch_starting_inside_a_corrupt_batch_names_the_offset_reached(fake_nodes):
    (node,) = fake_nodes(1)
    log = FakeLog()
    log.append(b"a")
    corrupt = bytearray(build_batch([b"x", b"y", b"z"], base_offset=1))  # offsets 1-3
    corrupt[-3] ^= 0xFF
    log.batches.append(bytes(corrupt))
    log.next_offset += 3
    log.append(b"e")
    serve(node, log, [node], node)
    with consumer_for([node]) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 2)
        error = poll_until_corrupt(consumer, [])
        assert (error.offset, error.next_offset) == (2, 4)
        consumer.seek(TP, error.next_offset)  # past the whole batch
        assert poll_values(consumer, 1) == [b"e"]


def run_console_consumer(node, capsys, *flags: str) -> tuple[int, str, str]:
    status = cli.main(["console-consumer", "--bootstrap-server", node.address, "--topic", "t", "--partition", "0",
                       "--offset", "earliest", "--timeout-ms", "1000", "--consumer-property", "retry.backoff.ms=10",
                       "--consumer-property", "fetch.max.wait.ms=10", *flags])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("kind", CORRUPT)
def test_the_console_consumer_stops_at_a_corrupt_batch_or_skips_it(fake_nodes, capsys, kind):
    (node,) = fake_nodes(1)
    serve(node, log_with_corrupt_middle(kind), [node], node)
    status, out, err = run_console_consumer(node, capsys)
    assert status != 0 and out.split() == ["a", "b"]
    assert "CORRUPT_MESSAGE" in err and "partition t-0 at offset 2" in err
    assert "Processed a total of 2 messages" in err
    status, out, err = run_console_consumer(node, capsys, "--skip-message-on-error")
    assert status == 0 and out.split() == ["a", "b", "d", "e"]
    assert "Skipping corrupt record at offset 2 of partition t-0" in err
    assert "Processed a total of 4 messages" in err
