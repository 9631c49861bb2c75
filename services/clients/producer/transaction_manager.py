"""The transactional producer's state and decisions (Kafka 3.x's TransactionManager), without I/O.

States and the moves between them, as Kafka's:

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION -> READY
                                             IN_TRANSACTION -> ABORTING_TRANSACTION -> READY
    IN_TRANSACTION / COMMITTING_TRANSACTION -> ABORTABLE_ERROR -> ABORTING_TRANSACTION
    any -> FATAL_ERROR

`init_transactions` gets the producer id and epoch; a transaction then adds each partition to
the coordinator (AddPartitionsToTxn) before the partition's first batch leaves: the sender asks
`partitions_to_add` for the partitions it holds data for, and drains only `partitions_in_txn`.
Errors are sorted by `action_for` into retry (after a back-off), find the coordinator again,
abortable (the transaction can only be aborted; then a new one may begin) and fatal (the
producer can only be closed). A failed send inside a transaction is abortable, except a fenced or
unauthorized producer (fatal). A failure that may have left a gap in a partition's sequence numbers
asks for an epoch bump, done by `abort_transaction`: with the abort itself (EndTxn with bump_epoch)
when the transaction was started, else by InitProducerId with the current id and epoch.

Every method is safe to call from the user's threads and the sender thread.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable

from services.clients.producer.errors import ProducerFencedError, TransactionStateError
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# target state -> the states it may be entered from (FATAL_ERROR: any)
VALID_SOURCES = {
    S.INITIALIZING: {S.UNINITIALIZED, S.INITIALIZING},
    S.READY: {S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION},
    S.IN_TRANSACTION: {S.READY},
    S.COMMITTING_TRANSACTION: {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION},
    S.ABORTING_TRANSACTION: {S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION},
    S.ABORTABLE_ERROR: {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR},
}


class Action(enum.Enum):
    """What to do with a coordinator's or a broker's answer."""

    OK = "ok"
    RETRY = "retry"  # after retry.backoff.ms
    FIND_COORDINATOR = "find_coordinator"  # forget the coordinator, look it up, retry
    ABORTABLE = "abortable"
    FATAL = "fatal"


FIND_AGAIN_CODES = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NETWORK_EXCEPTION})
RETRY_CODES = frozenset({Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.CONCURRENT_TRANSACTIONS,
                         Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.REQUEST_TIMED_OUT})
ABORTABLE_CODES = frozenset({Errors.TOPIC_AUTHORIZATION_FAILED, Errors.GROUP_AUTHORIZATION_FAILED,
                             Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.FENCED_INSTANCE_ID,
                             Errors.REBALANCE_IN_PROGRESS})
FENCED_CODES = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH})
# errors of a produce request that end the producer rather than the transaction
FATAL_PRODUCE_CODES = frozenset({Errors.PRODUCER_FENCED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                 Errors.CLUSTER_AUTHORIZATION_FAILED})
# the back-off of a transaction's first AddPartitionsToTxn while the previous one completes
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20
# produce errors after which the partition's sequence numbers may have a gap
SEQUENCE_CODES = frozenset({Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, Errors.UNKNOWN_PRODUCER_ID,
                            Errors.INVALID_PRODUCER_EPOCH})


def action_for(code: int) -> Action:
    """How a transactional request (to the transaction or group coordinator) handles `code`."""
    if code == Errors.NONE:
        return Action.OK
    if code in FIND_AGAIN_CODES:
        return Action.FIND_COORDINATOR
    if code in RETRY_CODES:
        return Action.RETRY
    if code in ABORTABLE_CODES:
        return Action.ABORTABLE
    return Action.FATAL


def coordinator_error(code: int, message: str = "") -> KafkaError:
    """The exception for a coordinator's error answer: a fenced epoch is ProducerFencedError."""
    if code in FENCED_CODES:
        return ProducerFencedError(message or "There is a newer producer with the same transactional id, "
                                              "which fences this one.")
    return KafkaError.from_code(code, message)


def add_partitions_code(codes: Iterable[int]) -> int:
    """The one code that decides an AddPartitionsToTxn answer: the first error that is not
    OPERATION_NOT_ATTEMPTED (partitions left alone because another one failed)."""
    codes = [code for code in codes if code != Errors.NONE]
    failures = [code for code in codes if code != Errors.OPERATION_NOT_ATTEMPTED]
    return failures[0] if failures else (codes[0] if codes else Errors.NONE)


class TransactionManager:
    """One transactional producer's state; see the module docstring."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int):
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._lock = threading.RLock()
        self.state = S.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions_in_txn: frozenset[TopicPartition] = frozenset()
        self.transaction_started = False  # the coordinator has partitions or offsets of this transaction
        self.epoch_bump_required = False

    # ------------------------------------------------------------------ states

    def _transition(self, target: TxnState, error: KafkaError | None = None) -> None:
        if target is not S.FATAL_ERROR and self.state not in VALID_SOURCES[target]:
            if self.state in (S.FATAL_ERROR, S.ABORTABLE_ERROR) and self.last_error is not None:
                raise self._error_in_state(target)
            raise TransactionStateError(f"TransactionalId {self.transactional_id}: invalid transition attempted "
                                        f"from state {self.state.value} to state {target.value}")
        self.state = target
        if error is not None:
            self.last_error = error
        elif target in (S.READY, S.IN_TRANSACTION):
            self.last_error = None

    def _error_in_state(self, target: TxnState) -> KafkaError:
        error = self.last_error
        if self.state is S.FATAL_ERROR:
            return error
        made = KafkaError(f"Cannot move to {target.value}: the transaction must be aborted first because an "
                        f"earlier request failed: {error}", error=error.error)
        made.__cause__ = error
        return made

    @property
    def has_error(self) -> bool:
        return self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR)

    @property
    def is_aborting(self) -> bool:
        return self.state is S.ABORTING_TRANSACTION

    def begin_init(self) -> None:
        with self._lock:
            self._transition(S.INITIALIZING)

    def initialized(self, producer_id: int, producer_epoch: int) -> None:
        """InitProducerId answered: the producer id and epoch to send with."""
        with self._lock:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self.epoch_bump_required = False
            if self.state is S.INITIALIZING:
                self._transition(S.READY)

    def begin(self) -> None:
        with self._lock:
            if self.state is S.UNINITIALIZED or (self.state is S.INITIALIZING and self.producer_id < 0):
                raise TransactionStateError("Cannot begin a transaction before completing a call to "
                                            "init_transactions")
            self._transition(S.IN_TRANSACTION)
            self.partitions_in_txn = frozenset()
            self.transaction_started = False

    def begin_commit(self) -> None:
        with self._lock:
            self._transition(S.COMMITTING_TRANSACTION)

    def begin_abort(self) -> None:
        with self._lock:
            self._transition(S.ABORTING_TRANSACTION)

    def complete_transaction(self) -> None:
        """EndTxn answered (or was not needed): a new transaction may begin."""
        with self._lock:
            self._transition(S.READY)
            self.partitions_in_txn = frozenset()
            self.transaction_started = False

    def fail(self, error: KafkaError, fatal: bool) -> KafkaError:
        """Records a failure: fatal, or abortable (ignored while aborting: that is already under
        way). Returns the error to raise."""
        with self._lock:
            if fatal:
                self._transition(S.FATAL_ERROR, error)
            elif self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                self._transition(S.ABORTABLE_ERROR, error)
            elif self.state is S.INITIALIZING:
                self._transition(S.FATAL_ERROR, error)
            return error

    def fail_for(self, action: Action, error: KafkaError) -> KafkaError:
        """`fail` for an answer sorted by `action_for` as ABORTABLE or FATAL."""
        return self.fail(error, fatal=action is not Action.ABORTABLE)

    # ------------------------------------------------------------------ checks before calls

    def check_send(self) -> None:
        """Raises unless records may be sent now (inside a transaction, no error)."""
        state = self.state
        if state is S.IN_TRANSACTION:
            return
        if self.has_error:
            error = KafkaError("Cannot perform send because at least one previous transactional request has "
                               f"failed with errors: {self.last_error}", error=self.last_error.error)
            raise error from self.last_error
        if self.producer_id < 0:
            raise TransactionStateError("Cannot perform a 'send' before completing a call to init_transactions "
                                        "when transactions are enabled.")
        raise TransactionStateError(f"Cannot call send in state {state.value}")

    def raise_if_error(self) -> None:
        """Raises the error that put the transaction in ABORTABLE_ERROR or FATAL_ERROR, if any."""
        with self._lock:
            if self.has_error:
                raise self._error_in_state(S.COMMITTING_TRANSACTION)

    def check_in_transaction(self, operation: str) -> None:
        with self._lock:
            if self.has_error:
                raise self._error_in_state(S.IN_TRANSACTION)
            if self.state is not S.IN_TRANSACTION:
                raise TransactionStateError(f"Cannot call {operation} in state {self.state.value}")

    # ------------------------------------------------------------------ partitions

    def partitions_to_add(self, with_data: Iterable[TopicPartition]) -> list[TopicPartition]:
        """The partitions holding data that the coordinator must add before their batches leave
        (none outside a transaction that is still sending)."""
        with self._lock:
            if self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                return []
            added = self.partitions_in_txn
            return sorted(tp for tp in with_data if tp not in added)

    def partitions_added(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self.partitions_in_txn = self.partitions_in_txn | frozenset(partitions)
            self.transaction_started = True

    def add_partitions_backoff_ms(self, code: int, retry_backoff_ms: int) -> int:
        """How long to wait before adding partitions again after `code`: briefly when the previous
        transaction is still completing (CONCURRENT_TRANSACTIONS before anything was added), as
        Kafka does, else `retry.backoff.ms`."""
        if code == Errors.CONCURRENT_TRANSACTIONS and not self.partitions_in_txn:
            return min(ADD_PARTITIONS_RETRY_BACKOFF_MS, retry_backoff_ms)
        return retry_backoff_ms

    def offsets_added(self) -> None:
        with self._lock:
            self.transaction_started = True

    def sending_allowed(self) -> bool:
        """Whether the sender may drain batches of the transaction's partitions now."""
        return self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION)

    # ------------------------------------------------------------------ produce answers

    def batch_failed(self, code: int, error: KafkaError) -> None:
        """A batch of the transaction failed for good with `code` (or expired)."""
        if code in SEQUENCE_CODES:
            self.require_epoch_bump()
        if code in FATAL_PRODUCE_CODES:
            self.fail(coordinator_error(code, str(error)) if code == Errors.PRODUCER_FENCED else error, fatal=True)
        else:
            self.fail(error, fatal=False)

    def require_epoch_bump(self) -> None:
        """The sequence numbers of some partition may have a gap: the abort bumps the epoch."""
        with self._lock:
            self.epoch_bump_required = True
