"""Which fetched batches a read_committed reader skips: Kafka's consumer rule for aborted
transactions, shared by the consumer (`CompletedFetch`) and the gateway (`RangeRecords`).

A read_committed fetch answer lists the transactions aborted within its range as (producer id,
first offset). `AbortedTransactions` keeps them ordered by first offset and is shown the batches
in offset order. At each batch with a producer id, the aborted transactions starting at or
before that batch's last offset make their producer "aborting"; from then on that producer's
transactional data batches are skipped until its ABORT marker (a control batch) ends the
transaction. Control batches are always skipped. Nothing else is: non-transactional batches,
committed transactions and other producers' batches pass.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from services.common.records.batch import BatchHeader
from services.common.records.reader import decode_batch, parse_control_record


class AbortedTransactions:
    """Aborted transactions of a partition's fetch answers, consulted batch by batch."""

    __slots__ = ("_pending", "_seen", "_aborting")

    def __init__(self, aborted: Iterable[tuple[int, int]] = ()):
        self._pending: list[tuple[int, int]] = []  # (first offset, producer id), a heap
        self._seen: set[tuple[int, int]] = set()
        self._aborting: set[int] = set()  # producer ids inside an aborted transaction
        self.add(aborted)

    def add(self, aborted: Iterable[tuple[int, int]]) -> None:
        """Takes an answer's aborted transactions as (producer id, first offset) pairs."""
        for producer_id, first_offset in aborted:
            if (first_offset, producer_id) not in self._seen:
                self._seen.add((first_offset, producer_id))
                heapq.heappush(self._pending, (first_offset, producer_id))

    def skips(self, buf, pos: int, header: BatchHeader) -> bool:
        """Whether the (validated) batch at `pos` of `buf` is hidden: a control batch, or a
        transactional batch of an aborted transaction. Batches must be shown in offset order."""
        if header.producer_id >= 0:
            pending = self._pending
            while pending and pending[0][0] <= header.last_offset:
                self._aborting.add(heapq.heappop(pending)[1])
        if header.is_control:
            if header.producer_id in self._aborting and _is_abort_marker(buf, pos):
                self._aborting.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._aborting


def _is_abort_marker(buf, pos: int) -> bool:
    records = decode_batch(buf, pos, check_crc=False)[1]
    return bool(records) and not parse_control_record(records[0].key, records[0].value).commit
