"""`TransactionIndex`: a segment's `.txnindex` file, the aborted transactions whose ABORT marker is in it.

Kafka's format, big-endian, one 34-byte entry per aborted transaction, in the order the markers
were appended (no header):

    offset  size  field
    0       2     version              int16, 0
    2       8     producer_id          int64
    10      8     first_offset         int64, first offset of the transaction's data in the log
    18      8     last_offset          int64, offset of its ABORT marker
    26      8     last_stable_offset   int64, the partition's last stable offset once the marker
                                       was written (the first offset of the next open transaction,
                                       or last_offset + 1)

The file is created with the first entry (most segments have none). Entries are kept in memory
once read (readers of a fetch and the Log's writer may load them at once: a lock orders that);
appends go to the file at once and are fsynced by `flush` (with the segment). A
trailing partial entry (a torn write) is ignored, and dropped by the next truncation.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import NamedTuple

from services.broker.log.errors import CorruptIndexError
from services.broker.log.files import unlink_if_exists

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexSearchResult(NamedTuple):
    """Aborted transactions overlapping a fetch range; `complete` when no later segment can hold more."""

    aborted: list[AbortedTxn]
    complete: bool


def encode_entry(txn: AbortedTxn) -> bytes:
    return ENTRY.pack(VERSION, *txn)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries of a file's bytes; raises CorruptIndexError on an unknown version."""
    whole = len(data) - len(data) % ENTRY_SIZE
    entries = []
    for version, *fields in ENTRY.iter_unpack(memoryview(data)[:whole]):
        if version != VERSION:
            raise CorruptIndexError(f"transaction index entry version {version} is not {VERSION}")
        entries.append(AbortedTxn(*fields))
    return entries


class TransactionIndex:
    """The aborted transactions of one segment; not thread-safe for writers (the Log's lock)."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self._file = None
        self._load_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path!r})"

    @property
    def entries(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is None:
            with self._load_lock:
                if self._entries is None:
                    try:
                        with open(self.path, "rb") as f:
                            self._entries = decode_entries(f.read())
                    except FileNotFoundError:
                        self._entries = []
                entries = self._entries
        return entries

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if self._file is None:
            self._file = open(self.path, "ab")  # noqa: SIM115 - kept open while the segment is
        self._file.write(encode_entry(txn))
        self._file.flush()
        entries.append(txn)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping [fetch_offset, upper_bound_offset): ending at or after the fetch
        offset and starting before the bound; complete once an entry's last stable offset reaches
        the bound (every transaction aborted later started after it)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drops the entries whose marker is at or after `offset` (and any torn tail)."""
        if not os.path.exists(self.path):
            self._entries = []
            return
        entries = self.entries
        keep = [txn for txn in entries if txn.last_offset < offset]
        size = len(keep) * ENTRY_SIZE
        if len(keep) == len(entries) and os.path.getsize(self.path) == size:
            return
        self._close_file()
        with open(self.path, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())
        self._entries = keep

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self.flush()
        self._close_file()

    def close_handler(self) -> None:
        self._close_file()

    def rename_to(self, path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, path)
        self.path = path

    def delete_if_exists(self) -> None:
        self._close_file()
        unlink_if_exists(self.path)

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
