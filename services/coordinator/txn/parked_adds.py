"""`ParkedAdds`: the AddPartitionsToTxn requests the transaction coordinator core holds while the
previous transaction of their transactional id completes, at most one per transactional id.

A request is parked with the ownership epoch of its `__transaction_state` partition and the
producer id and epoch it was checked with; it is taken back only by the same transaction (same
partition ownership, same producer id and epoch), else it stays until it expires or its partition
is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.common.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class ParkedAdd:
    """An AddPartitionsToTxn waiting for the previous transaction of its transactional id to complete."""

    partition: int
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    reply: Any


class ParkedAdds:
    def __init__(self) -> None:
        self._parked: dict[str, ParkedAdd] = {}

    def park(self, transactional_id: str, parked: ParkedAdd) -> ParkedAdd | None:
        """Parks `parked`; returns the request it replaces, which the caller answers."""
        replaced = self._parked.get(transactional_id)
        self._parked[transactional_id] = parked
        return replaced

    def take(self, transactional_id: str, partition: int, coordinator_epoch: int, producer_id: int,
             producer_epoch: int) -> ParkedAdd | None:
        """The request parked for this transaction, removed; None when there is none that matches."""
        parked = self._parked.get(transactional_id)
        if parked is None or (parked.partition, parked.coordinator_epoch, parked.producer_id,
                              parked.producer_epoch) != (partition, coordinator_epoch, producer_id, producer_epoch):
            return None
        del self._parked[transactional_id]
        return parked

    def pop(self, transactional_id: str) -> ParkedAdd | None:
        return self._parked.pop(transactional_id, None)

    def expire(self, transactional_id: str, reply: Any) -> bool:
        """Removes the request answered by `reply` if it is still parked; whether it was."""
        parked = self._parked.get(transactional_id)
        if parked is None or parked.reply is not reply:
            return False
        del self._parked[transactional_id]
        return True

    def drop_partition(self, partition: int) -> list[ParkedAdd]:
        """Removes and returns the requests parked for transactional ids of `partition`."""
        dropped = [(t, p) for t, p in self._parked.items() if p.partition == partition]
        for transactional_id, _ in dropped:
            del self._parked[transactional_id]
        return [parked for _, parked in dropped]

    def __len__(self) -> int:
        return len(self._parked)
