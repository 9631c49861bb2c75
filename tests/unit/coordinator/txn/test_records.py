"""`__transaction_state` records: Kafka's TransactionLog layout, round trips, bad input."""

import struct

import pytest

from services.common.topic_partition import TopicPartition
from services.coordinator.txn import records
from services.coordinator.txn.records import TransactionState, TxnLogValue, TxnRecordFormatError


def test_key_layout_is_version_zero_and_the_id():
    assert records.encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert records.decode_key(b"\x00\x00\x00\x02tx") == "tx"


def test_value_layout_matches_kafkas_transaction_log():
    value = TxnLogValue(1000, 3, 60000, TransactionState.ONGOING,
                        frozenset({TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)}),
                        1700000000123, 1700000000000)
    expected = (struct.pack(">hqhib", 0, 1000, 3, 60000, 1) + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
                + struct.pack(">qq", 1700000000123, 1700000000000))
    assert records.encode_value(value) == expected
    assert records.decode_value(expected) == value


def test_a_bumped_abort_is_version_one_with_the_epoch_it_bumped_from():
    value = TxnLogValue(1000, 4, 60000, TransactionState.PREPARE_ABORT, frozenset(), 9, 8, bumped_from_epoch=3)
    expected = (struct.pack(">hqhib", 1, 1000, 4, 60000, 3) + struct.pack(">i", 0) + struct.pack(">qq", 9, 8)
                + struct.pack(">h", 3))
    assert records.encode_value(value) == expected
    assert records.decode_value(expected) == value
    assert records.encode_value(TxnLogValue(1000, 4, 60000, TransactionState.PREPARE_ABORT, frozenset(), 9, 8))[:2] \
        == b"\x00\x00"
    with pytest.raises(TxnRecordFormatError):
        records.decode_value(expected[:-1])


@pytest.mark.parametrize("state", list(TransactionState))
def test_every_state_round_trips(state):
    value = TxnLogValue(7, 0, 1, state, frozenset(), 5, -1)
    assert records.decode_value(records.encode_value(value)) == value


def test_a_null_value_is_a_tombstone():
    assert records.decode_value(None) is None


def test_state_names_are_kafkas():
    assert [s.display_name for s in TransactionState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
    assert TransactionState.from_display_name("PrepareAbort") is TransactionState.PREPARE_ABORT
    assert TransactionState.from_display_name("Bogus") is None


@pytest.mark.parametrize("data", [
    b"", b"\x00\x01\x00\x01x", b"\x00\x00\x00\x05ab", b"\x00\x00\xff\xff", None,
])
def test_bad_keys_are_refused(data):
    with pytest.raises(TxnRecordFormatError):
        records.decode_key(data)


def test_bad_values_are_refused():
    good = records.encode_value(TxnLogValue(7, 0, 1, TransactionState.EMPTY, frozenset(), 5, -1))
    with pytest.raises(TxnRecordFormatError):
        records.decode_value(good[:-1])
    with pytest.raises(TxnRecordFormatError):
        records.decode_value(b"\x00\x01" + good[2:])
    with pytest.raises(TxnRecordFormatError):
        records.decode_value(good[:16] + b"\x09" + good[17:])
    with pytest.raises(TxnRecordFormatError):
        records.decode_value(good[:17] + struct.pack(">i", -1) + good[21:])
