"""The exactly-once streaming sink's decisions, pure (no I/O): what a micro-batch's commit records,
commits and aborts, and what a restarted driver rolls forward.

Each task writes its rows in a Kafka transaction of a transactional id stable per (query, task
partition), `<prefix>-<partition id>`, sends them all and leaves the transaction open
(`Producer.prepare_transaction`); its commit message carries the `PreparedTransaction`. The
driver's `commit(messages, batch_id)`:
- first rolls forward the latest `BatchRecord` if it is not marked committed (`recovery`);
- a batch id at or below the latest recorded one is a replay of a batch already decided: the
  replay's transactions are aborted and nothing else changes (`plan_commit`);
- a new batch is recorded durably (its transactions, not committed), then its transactions are
  committed, then the record is marked committed.
Last, transactions of the query's ids still open that no task of the batch holds (`leftovers`: left
by the tasks of a killed driver whose ids were not reused, or by zombie tasks) are aborted.
`abort(messages, batch_id)` (Spark's, also after a commit that failed) aborts the transactions of
the messages but those of a recorded batch, which are decided: they are rolled forward
(`plan_abort`).

Recording before committing is what makes a crash between two commits recoverable: a recorded
batch is decided and is rolled forward; a batch not recorded never committed anything and its
transactions are aborted by the next `init_transactions` of their ids (the replayed batch's
tasks), by the next commit's `leftovers`, or by the transaction timeout.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, replace

from services.clients.admin_types import PreparedTransaction

TRANSACTIONAL_ID_PREFIX = "odradek-sink-"


@dataclass(frozen=True)
class BatchRecord:
    """A micro-batch's transactions, recorded before any is committed; `committed` once all are."""

    batch_id: int
    transactions: tuple[PreparedTransaction, ...] = ()
    committed: bool = False


@dataclass(frozen=True)
class CommitPlan:
    """What `commit(messages, batch_id)` does, in order: write `record` (when not None), commit
    `commit`, abort `abort`, then write `finished` (when not None)."""

    record: BatchRecord | None
    commit: tuple[PreparedTransaction, ...]
    abort: tuple[PreparedTransaction, ...]
    finished: BatchRecord | None


def default_prefix(checkpoint_location: str) -> str:
    """The transactional id prefix of a query: stable for its checkpoint, distinct between them."""
    return TRANSACTIONAL_ID_PREFIX + hashlib.sha256(checkpoint_location.encode()).hexdigest()[:16]


def transactional_id(prefix: str, partition_id: int) -> str:
    return f"{prefix}-{partition_id}"


def prepared_of(transactions: Iterable[PreparedTransaction | None]) -> tuple[PreparedTransaction, ...]:
    """The transactions to end: those that wrote to some partition (others have nothing open)."""
    return tuple(txn for txn in transactions if txn is not None and txn.topic_partitions)


def recovery(latest: BatchRecord | None) -> tuple[PreparedTransaction, ...]:
    """The transactions to commit before anything else: a recorded batch not marked committed."""
    if latest is None or latest.committed:
        return ()
    return latest.transactions


def plan_commit(batch_id: int, prepared: tuple[PreparedTransaction, ...], latest: BatchRecord | None) -> CommitPlan:
    """The commit of micro-batch `batch_id` whose tasks prepared `prepared`, the latest record
    being `latest` (already rolled forward)."""
    if latest is not None and batch_id <= latest.batch_id:
        return CommitPlan(None, (), prepared, None)
    record = BatchRecord(batch_id, prepared)
    return CommitPlan(record, prepared, (), replace(record, committed=True))


def leftovers(open_ids: Iterable[str], prefix: str, batch: Iterable[PreparedTransaction]) -> list[str]:
    """The open transactional ids of the query (`<prefix>-<partition id>`) that `batch` does not hold."""
    held = {txn.transactional_id for txn in batch}
    return sorted(tid for tid in open_ids
                  if tid.startswith(prefix + "-") and tid[len(prefix) + 1:].isdigit() and tid not in held)


def plan_abort(batch_id: int, prepared: tuple[PreparedTransaction, ...],
               latest: BatchRecord | None) -> tuple[PreparedTransaction, ...]:
    """The transactions Spark's abort of `batch_id` may abort: not those the batch's record holds."""
    recorded = set(latest.transactions) if latest is not None and latest.batch_id == batch_id else set()
    return tuple(txn for txn in prepared if txn not in recorded)
