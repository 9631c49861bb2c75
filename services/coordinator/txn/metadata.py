"""`TransactionMetadata`: one transactional id's state and its state machine (Kafka 2.8's
TransactionMetadata), changed only by applying a `TxnTransit`.

A command first computes the transition (`prepare_*`, pure, nothing changes) and marks it
`pending` while its record is written to `__transaction_state`; once written, `apply` makes it
the state. Replaying a record applies it the same way, without the checks of a live transition
and without the previous producer id and epoch, which the log does not hold; only an abort that
bumped the epoch (`prepare_bumped_abort`) logs the epoch it bumped from (`bumped_from_epoch`, kept
through its CompleteAbort), so that a retry of its EndTxn is recognised after a reload too.

    target state        allowed from
    Empty               Empty, CompleteCommit, CompleteAbort
    Ongoing             Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit       Ongoing
    PrepareAbort        Ongoing, PrepareEpochFence
    CompleteCommit      PrepareCommit
    CompleteAbort       PrepareAbort
    Dead                Empty, CompleteCommit, CompleteAbort
    PrepareEpochFence   Ongoing
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from services.common.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from services.common.topic_partition import TopicPartition
from services.coordinator.txn.records import NO_TIMESTAMP, TransactionState, TxnLogValue

S = TransactionState
MAX_PRODUCER_EPOCH = 0x7FFF

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """A transition the state machine does not allow (a coordinator bug, never a client's)."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps one epoch in reserve so that an epoch fence can always be written."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """A transition: the record to write, and the previous producer id and epoch it sets in memory."""

    value: TxnLogValue
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    @property
    def state(self) -> TransactionState:
        return self.value.state


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TransactionState = S.EMPTY
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_timestamp_ms: int = NO_TIMESTAMP
    last_update_timestamp_ms: int = NO_TIMESTAMP
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    bumped_from_epoch: int = NO_PRODUCER_EPOCH  # the epoch an EndTxn abort with bump ended
    pending: TxnTransit | None = None

    # ------------------------------------------------------------------ applying

    @classmethod
    def from_log(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        metadata = cls(transactional_id, value.producer_id)
        metadata.apply(TxnTransit(value), replaying=True)
        return metadata

    def apply(self, transit: TxnTransit, replaying: bool = False) -> None:
        """Makes `transit` the state: the one mutator. A live transition is checked first."""
        value = transit.value
        if not replaying and self.state not in VALID_PREVIOUS_STATES[value.state]:
            raise IllegalTransition(f"transactional id {self.transactional_id}: {self.state.display_name} "
                                    f"cannot become {value.state.display_name}")
        self.producer_id, self.producer_epoch = value.producer_id, value.producer_epoch
        self.timeout_ms, self.state, self.partitions = value.timeout_ms, value.state, value.partitions
        self.start_timestamp_ms = value.start_timestamp_ms
        self.last_update_timestamp_ms = value.last_update_timestamp_ms
        self.last_producer_id, self.last_producer_epoch = transit.last_producer_id, transit.last_producer_epoch
        self.bumped_from_epoch = value.bumped_from_epoch
        if self.pending == transit:
            self.pending = None

    def after(self, transit: TxnTransit) -> TransactionMetadata:
        """A copy of this transaction with `transit` applied (this one unchanged), to prepare the
        transition that will follow it in the same write."""
        copy = dataclasses.replace(self, pending=None)
        copy.apply(transit)
        return copy

    # ------------------------------------------------------------------ preparing transitions

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _transit(self, state: TransactionState, now_ms: int, *, producer_id: int | None = None,
                 epoch: int | None = None, last_epoch: int | None = None, timeout_ms: int | None = None,
                 partitions: frozenset[TopicPartition] | None = None, start_ms: int | None = None,
                 bumped_from: int = NO_PRODUCER_EPOCH) -> TxnTransit:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(f"transactional id {self.transactional_id}: {self.state.display_name} "
                                    f"cannot become {state.display_name}")
        value = TxnLogValue(
            self.producer_id if producer_id is None else producer_id,
            self.producer_epoch if epoch is None else epoch,
            self.timeout_ms if timeout_ms is None else timeout_ms, state,
            self.partitions if partitions is None else partitions, now_ms,
            self.start_timestamp_ms if start_ms is None else start_ms, bumped_from)
        return TxnTransit(value, self.producer_id, self.last_producer_epoch if last_epoch is None else last_epoch)

    def prepare_epoch_bump(self, epoch: int, last_epoch: int, timeout_ms: int, now_ms: int) -> TxnTransit:
        """Empty with `epoch`: InitProducerId's answer."""
        return self._transit(S.EMPTY, now_ms, epoch=epoch, last_epoch=last_epoch, timeout_ms=timeout_ms,
                             partitions=frozenset(), start_ms=NO_TIMESTAMP)

    def prepare_producer_id_rotation(self, producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """Empty with a new producer id at epoch 0 (the epochs of the old one are used up)."""
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._transit(S.EMPTY, now_ms, producer_id=producer_id, epoch=0, last_epoch=last_epoch,
                             timeout_ms=timeout_ms, partitions=frozenset(), start_ms=NO_TIMESTAMP)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        starts = self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        return self._transit(S.ONGOING, now_ms, partitions=self.partitions | added,
                             start_ms=now_ms if starts else self.start_timestamp_ms)

    def prepare_abort_or_commit(self, commit: bool, now_ms: int) -> TxnTransit:
        return self._transit(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms)

    def prepare_bumped_abort(self, now_ms: int) -> TxnTransit:
        """PrepareAbort with the epoch bumped, asked by the producer itself (EndTxn with bump_epoch):
        the ABORT markers carry the new epoch, so the partitions fence late batches of the old one.
        The caller checks the epoch is not exhausted."""
        if self.state != S.ONGOING or self.is_epoch_exhausted:
            raise IllegalTransition(f"transactional id {self.transactional_id}: cannot bump epoch "
                                    f"{self.producer_epoch} aborting from {self.state.display_name}")
        epoch = self.producer_epoch
        return self._transit(S.PREPARE_ABORT, now_ms, epoch=epoch + 1, last_epoch=epoch, bumped_from=epoch)

    def prepare_fenced_abort(self, now_ms: int) -> TxnTransit:
        """PrepareAbort with the epoch bumped (Kafka's PrepareEpochFence, then PrepareAbort), so the
        producer of the ongoing transaction is fenced; an exhausted epoch stays as it is."""
        if self.state != S.ONGOING:
            raise IllegalTransition(f"transactional id {self.transactional_id}: only an ongoing transaction "
                                    f"can be fenced, not {self.state.display_name}")
        epoch = self.producer_epoch if self.producer_epoch >= MAX_PRODUCER_EPOCH else self.producer_epoch + 1
        return self._transit(S.PREPARE_ABORT, now_ms, epoch=epoch, last_epoch=NO_PRODUCER_EPOCH)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._transit(state, now_ms, partitions=frozenset(), bumped_from=self.bumped_from_epoch)

    def prepare_dead(self) -> TxnTransit:
        return self._transit(S.DEAD, self.last_update_timestamp_ms, partitions=frozenset())
