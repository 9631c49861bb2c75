"""What one transaction coordinator command asks of the world, as plain data (`TxnOutcome`).

The core decides and never acts; the runtime (runtime.py) carries an outcome out:

- `appends`: `TxnAppend(append_id, partition, records)`, records for a partition of
  `__transaction_state` with acks=all, in order; each write's error code goes back to the core's
  `on_append_done`.
- `markers`: `TxnMarkers`, the COMMIT or ABORT markers one transaction needs written to each of its
  partitions; once every partition has its marker the runtime calls the core's `on_markers_done`.
- `responses`: `(reply, result)` pairs answering requests (parked while their record is written).
- `parked`: `(transactional_id, reply)` of each AddPartitionsToTxn parked until the previous
  transaction completes; after a while the runtime calls the core's `expire_parked_add` for it.
- `result`: the immediate answer of a command that answers at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.common.topic_partition import TopicPartition

Records = list[tuple[bytes, bytes | None]]


@dataclass(frozen=True, slots=True)
class TxnAppend:
    append_id: int
    partition: int
    records: Records


@dataclass(frozen=True, slots=True)
class TxnMarkers:
    """Markers ending one transaction, written with the coordinator's epoch of its
    `__transaction_state` partition `txn_partition`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    txn_partition: int
    partitions: frozenset[TopicPartition]


@dataclass
class TxnOutcome:
    responses: list[tuple[Any, Any]] = field(default_factory=list)
    appends: list[TxnAppend] = field(default_factory=list)
    markers: list[TxnMarkers] = field(default_factory=list)
    parked: list[tuple[str, Any]] = field(default_factory=list)
    result: Any = None

    def respond(self, reply: Any, result: Any) -> None:
        if reply is not None:
            self.responses.append((reply, result))
