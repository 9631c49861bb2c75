"""The transaction index file: Kafka's 34-byte entries, search, truncation, torn tails."""

from __future__ import annotations

import os
import struct

import pytest

from services.broker.log.errors import CorruptIndexError
from services.broker.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, decode_entries, encode_entry


def index(tmp_path) -> TransactionIndex:
    return TransactionIndex(os.fspath(tmp_path / "00000000000000000000.txnindex"), 0)


def test_entries_are_kafkas_34_byte_layout(tmp_path):
    txn = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=21)
    assert ENTRY_SIZE == 34
    assert encode_entry(txn) == struct.pack(">hqqqq", 0, 7, 10, 20, 21)
    idx = index(tmp_path)
    idx.append(txn)
    idx.close()
    with open(idx.path, "rb") as f:
        assert f.read() == encode_entry(txn)
    assert TransactionIndex(idx.path, 0).entries == [txn]


def test_no_file_until_the_first_abort(tmp_path):
    idx = index(tmp_path)
    assert idx.entries == []
    idx.truncate_to(0)
    idx.flush()
    assert not os.path.exists(idx.path)


def test_collect_aborted_overlapping_the_range_and_completion(tmp_path):
    idx = index(tmp_path)
    entries = [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 15, 16)]
    for txn in entries:
        idx.append(txn)
    found = idx.collect_aborted(6, 11)
    assert found.aborted == [entries[1]]  # the first ended before 6; the third starts at 12
    assert found.complete  # the second's last stable offset 10 < 11, but the third's 16 >= 11
    assert idx.collect_aborted(0, 100) == ([*entries], False)
    assert idx.collect_aborted(0, 2).aborted == [entries[0]]


def test_truncate_drops_entries_whose_marker_is_cut_and_a_torn_tail(tmp_path):
    idx = index(tmp_path)
    for i in range(3):
        idx.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    idx.close()
    with open(idx.path, "ab") as f:
        f.write(b"\x00" * 7)  # a torn write
    reopened = TransactionIndex(idx.path, 0)
    assert len(reopened.entries) == 3
    reopened.truncate_to(15)
    assert [t.producer_id for t in reopened.entries] == [0]
    assert os.path.getsize(idx.path) == ENTRY_SIZE
    reopened.append(AbortedTxn(9, 16, 17, 18))
    reopened.close()
    assert [t.producer_id for t in TransactionIndex(idx.path, 0).entries] == [0, 9]


def test_unknown_version_is_corrupt():
    with pytest.raises(CorruptIndexError):
        decode_entries(struct.pack(">hqqqq", 1, 1, 2, 3, 4))


def test_rename_and_delete(tmp_path):
    idx = index(tmp_path)
    idx.append(AbortedTxn(1, 0, 5, 6))
    idx.rename_to(idx.path + ".deleted")
    assert os.path.exists(idx.path) and idx.path.endswith(".deleted")
    idx.delete_if_exists()
    assert os.listdir(tmp_path) == []
