"""`TransactionCoordinatorCore`: Kafka 2.8's TransactionCoordinator and TransactionStateManager as
pure commands over the transactions of the `__transaction_state` partitions this instance owns.

Every command reads the time from the injected clock and returns a `TxnOutcome` (effects.py):
records to append, markers to write, responses. A transaction changes only when its record is
written (`on_append_done` applies it) or replayed (`replay`); while a record is in flight the
transaction is `pending` and other requests for it answer CONCURRENT_TRANSACTIONS. A new
transactional id enters memory as Empty with no epoch before its first record, as in Kafka.

The one exception: AddPartitionsToTxn (and AddOffsetsToTxn) of the transaction's own producer
while the previous transaction is completing (PrepareCommit / PrepareAbort, its markers being
written) is parked instead, one per transactional id (a newer one answers the older
CONCURRENT_TRANSACTIONS). Once the markers are written, CompleteCommit / CompleteAbort and the new
transaction's Ongoing go in one append (two records of one batch, replayed in that order), and the
parked request is answered when it is written: Kafka's order of records, without the producer's
retry loop or a second write. `expire_parked_add` answers a request parked too long
CONCURRENT_TRANSACTIONS (the runtime's timer, `TxnOutcome.parked`), which the producer retries.

    begin_loading / replay / complete_loading / unload     partition ownership; completing a load
                                    re-sends the markers of every PrepareCommit / PrepareAbort found
    handle_init_producer_id / handle_add_partitions / handle_end_txn    answered through `reply`
    on_append_done(append_id, error_code) / on_markers_done(...)        effects finishing
    expire_parked_add(transactional_id, reply)                          a parked add's time is up
    (admin.py) handle_list_transactions / handle_describe_transaction   answered at once
    (admin.py) abort_timed_out_transactions / remove_expired_transactional_ids   periodic tasks

Requests are checked first for their transactional id (INVALID_REQUEST when empty), whether the
coordinator runs and owns the id's partition (NOT_COORDINATOR) and whether it is loading
(COORDINATOR_LOAD_IN_PROGRESS). Fencing errors: an unknown or other producer id is
INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED (Kafka 2.8's answer; the Kafka-protocol
listener answers INVALID_PRODUCER_EPOCH to request versions older than KIP-588's).

EndTxn's abort may bump the epoch (`bump_epoch`, as KIP-890 does at the end of every transaction):
PrepareAbort and CompleteAbort are written with epoch e + 1, so the ABORT markers carry it and
every partition fences a late batch of epoch e instead of letting it open a transaction that the
producer's next commit would take in. The answer gives e + 1; a retry of that EndTxn at e is
answered as a retry (CONCURRENT_TRANSACTIONS until CompleteAbort is written, then NONE) with e + 1,
also after a reload (the log keeps the epoch the abort bumped from). An exhausted epoch is not
bumped: the abort is a plain one answered with e, and the producer bumps with InitProducerId, which
gives it a new producer id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from services.common.clock import Clock
from services.common.errors import Errors
from services.common.hashing import coordinator_partition
from services.common.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from services.common.shared_types import EndTxnResult, InitProducerIdResult
from services.common.topic_partition import TopicPartition
from services.coordinator.txn import records
from services.coordinator.txn.admin import COMPLETED, TxnAdmin
from services.coordinator.txn.config import TransactionConfig
from services.coordinator.txn.effects import TxnAppend, TxnMarkers, TxnOutcome
from services.coordinator.txn.metadata import TransactionMetadata, TxnTransit, is_epoch_exhausted
from services.coordinator.txn.parked_adds import ParkedAdd, ParkedAdds
from services.coordinator.txn.records import TransactionState as S

logger = logging.getLogger(__name__)

_PREPARED = (S.PREPARE_COMMIT, S.PREPARE_ABORT)
_STORE_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
}


def txn_store_error(error_code: int) -> int:
    """The error a failed `__transaction_state` append is answered with (Kafka's mapping)."""
    return _STORE_ERRORS.get(error_code, error_code)


@dataclass
class TxnPartition:
    """One owned `__transaction_state` partition: its ownership epoch and its transactions."""

    coordinator_epoch: int
    loading: bool = True
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Written:
    """What to do once an append is written: its transitions, applied in order, and `kind`, the
    command that asked for it."""

    partition: int
    coordinator_epoch: int
    transactional_id: str
    transits: tuple[TxnTransit, ...]
    kind: str
    reply: Any


class TransactionCoordinatorCore(TxnAdmin):
    def __init__(self, config: TransactionConfig, clock: Clock, generate_producer_id: Callable[[], int]) -> None:
        self._config = config
        self._clock = clock
        self._generate_producer_id = generate_producer_id
        self.active = False
        self.partitions: dict[int, TxnPartition] = {}
        self._inflight: dict[int, _Written] = {}
        self._parked_adds = ParkedAdds()
        self._last_append_id = 0

    # ------------------------------------------------------------------ lifecycle and ownership

    def start(self) -> TxnOutcome:
        self.active = True
        return TxnOutcome()

    def shutdown(self) -> TxnOutcome:
        fx = TxnOutcome()
        self.active = False
        for partition in sorted(self.partitions):
            self._drop_partition(partition, fx)
        return fx

    def partition_for(self, transactional_id: str) -> int:
        return coordinator_partition(transactional_id, self._config.transaction_state_log_num_partitions)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> TxnOutcome:
        fx = TxnOutcome()
        self._drop_partition(partition, fx)
        self.partitions[partition] = TxnPartition(coordinator_epoch)
        return fx

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        """One record of a loading partition, in log order."""
        owned = self.partitions.get(partition)
        if owned is None or not owned.loading:
            return
        try:
            transactional_id, logged = records.decode_key(key), records.decode_value(value)
        except records.TxnRecordFormatError as e:
            logger.warning("__transaction_state-%d: skipping a record: %s", partition, e)
            return
        if logged is None:
            owned.transactions.pop(transactional_id, None)
        elif transactional_id in owned.transactions:
            owned.transactions[transactional_id].apply(TxnTransit(logged), replaying=True)
        else:
            owned.transactions[transactional_id] = TransactionMetadata.from_log(transactional_id, logged)

    def complete_loading(self, partition: int) -> TxnOutcome:
        fx = TxnOutcome()
        owned = self.partitions.get(partition)
        if owned is not None and owned.loading:
            owned.loading = False
            for txn in owned.transactions.values():
                if txn.state in _PREPARED:
                    fx.markers.append(self._markers(partition, owned, txn))
        return fx

    def unload(self, partition: int) -> TxnOutcome:
        fx = TxnOutcome()
        self._drop_partition(partition, fx)
        return fx

    def _drop_partition(self, partition: int, fx: TxnOutcome) -> None:
        self.partitions.pop(partition, None)
        for append_id, written in list(self._inflight.items()):
            if written.partition == partition:
                del self._inflight[append_id]
                fx.respond(written.reply, self._error_result(written.kind, Errors.NOT_COORDINATOR))
        for parked in self._parked_adds.drop_partition(partition):
            fx.respond(parked.reply, Errors.NOT_COORDINATOR)

    def served_partitions(self) -> set[int]:
        return {p for p, owned in self.partitions.items() if not owned.loading}

    def is_append_wanted(self, append_id: int) -> bool:
        return append_id in self._inflight

    # ------------------------------------------------------------------ looking a transaction up

    def _owner(self, transactional_id: str) -> tuple[int, int, TxnPartition | None]:
        """(error, partition, owned partition) for a transactional id's requests."""
        partition = self.partition_for(transactional_id)
        owned = self.partitions.get(partition)
        if not self.active or owned is None:
            return Errors.NOT_COORDINATOR, partition, None
        if owned.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, partition, None
        return Errors.NONE, partition, owned

    # ------------------------------------------------------------------ InitProducerId

    def handle_init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int,
                                producer_epoch: int, reply: Any) -> TxnOutcome:
        fx = TxnOutcome()
        error = self._check_init(transactional_id, timeout_ms, producer_id, producer_epoch)
        if error != Errors.NONE:
            fx.respond(reply, InitProducerIdResult(error))
            return fx
        if transactional_id is None:  # an idempotent producer: a new id, as any broker answers
            fx.respond(reply, self._new_producer_id())
            return fx
        error, partition, owned = self._owner(transactional_id)
        if owned is None:
            fx.respond(reply, InitProducerIdResult(error))
            return fx
        txn = owned.transactions.get(transactional_id)
        if txn is None:
            fresh = self._new_producer_id()
            if fresh.error_code != Errors.NONE:
                fx.respond(reply, fresh)
                return fx
            txn = owned.transactions[transactional_id] = TransactionMetadata(
                transactional_id, fresh.producer_id, NO_PRODUCER_EPOCH, timeout_ms, S.EMPTY,
                last_update_timestamp_ms=self._clock.time_ms())
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        transit = self._prepare_init(txn, timeout_ms, expected)
        if isinstance(transit, int):
            fx.respond(reply, InitProducerIdResult(transit))
            return fx
        kind = "fence" if transit.state == S.PREPARE_ABORT else "init"
        self._append(partition, owned, txn, (transit,), kind, reply, fx)
        return fx

    def _check_init(self, transactional_id: str | None, timeout_ms: int, producer_id: int,
                    producer_epoch: int) -> int:
        if transactional_id is not None and not transactional_id:
            return Errors.INVALID_REQUEST
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return Errors.INVALID_REQUEST
        if transactional_id is not None and not 0 < timeout_ms <= self._config.transaction_max_timeout_ms:
            return Errors.INVALID_TRANSACTION_TIMEOUT
        return Errors.NONE

    def _new_producer_id(self) -> InitProducerIdResult:
        try:
            return InitProducerIdResult(Errors.NONE, self._generate_producer_id(), 0)
        except Exception as e:
            logger.warning("cannot claim a producer id block: %s", e)
            return InitProducerIdResult(Errors.COORDINATOR_NOT_AVAILABLE, error_message=str(e))

    def _prepare_init(self, txn: TransactionMetadata, timeout_ms: int,
                      expected: tuple[int, int] | None) -> TxnTransit | int:
        """The transition InitProducerId asks for, or its error (Kafka's prepareInitProducerIdTransit)."""
        if txn.pending is not None or txn.state in _PREPARED:
            return Errors.CONCURRENT_TRANSACTIONS
        if expected is not None and not _is_valid_producer_id(txn, *expected):
            return Errors.PRODUCER_FENCED
        now_ms = self._clock.time_ms()
        if txn.state == S.ONGOING:  # abort it first; the client retries after CONCURRENT_TRANSACTIONS
            return txn.prepare_fenced_abort(now_ms)
        if txn.state not in COMPLETED:
            return Errors.CONCURRENT_TRANSACTIONS
        if txn.is_epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
            fresh = self._new_producer_id()
            if fresh.error_code != Errors.NONE:
                return fresh.error_code
            return txn.prepare_producer_id_rotation(fresh.producer_id, timeout_ms, now_ms, expected is not None)
        bumped = txn.producer_epoch + 1
        if expected is None:
            epochs = (bumped, NO_PRODUCER_EPOCH)
        elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == txn.producer_epoch:
            epochs = (bumped, txn.producer_epoch)
        elif expected[1] == txn.last_producer_epoch:  # a retry of a bump that succeeded
            epochs = (txn.producer_epoch, txn.last_producer_epoch)
        else:
            return Errors.PRODUCER_FENCED
        return txn.prepare_epoch_bump(epochs[0], epochs[1], timeout_ms, now_ms)

    # ------------------------------------------------------------------ AddPartitionsToTxn

    def handle_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[TopicPartition], reply: Any) -> TxnOutcome:
        fx = TxnOutcome()
        added = frozenset(partitions)
        error, partition, owned, txn = self._fenced(transactional_id, producer_id, producer_epoch)
        if txn is not None:
            if _is_completing(txn):
                parked = ParkedAdd(partition, owned.coordinator_epoch, producer_id, producer_epoch, added, reply)
                replaced = self._parked_adds.park(transactional_id, parked)
                if replaced is not None:
                    fx.respond(replaced.reply, Errors.CONCURRENT_TRANSACTIONS)
                fx.parked.append((transactional_id, reply))
                return fx
            if txn.pending is not None or txn.state in _PREPARED:
                error = Errors.CONCURRENT_TRANSACTIONS
            elif txn.state == S.ONGOING and added <= txn.partitions:
                error = Errors.NONE
            else:
                transit = txn.prepare_add_partitions(added, self._clock.time_ms())
                self._append(partition, owned, txn, (transit,), "add", reply, fx)
                return fx
        fx.respond(reply, error)
        return fx

    def expire_parked_add(self, transactional_id: str, reply: Any) -> TxnOutcome:
        """Answers CONCURRENT_TRANSACTIONS to `reply` if it is still parked for `transactional_id`."""
        fx = TxnOutcome()
        if self._parked_adds.expire(transactional_id, reply):
            fx.respond(reply, Errors.CONCURRENT_TRANSACTIONS)
        return fx

    def _fenced(self, transactional_id: str, producer_id: int, producer_epoch: int
                ) -> tuple[int, int, TxnPartition | None, TransactionMetadata | None]:
        """(error, partition, owned, transaction): the transaction when the producer may act on it."""
        if not transactional_id:
            return Errors.INVALID_REQUEST, -1, None, None
        error, partition, owned = self._owner(transactional_id)
        if owned is None:
            return error, partition, None, None
        txn = owned.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING, partition, owned, None
        if txn.producer_epoch != producer_epoch:
            return Errors.PRODUCER_FENCED, partition, owned, None
        return Errors.NONE, partition, owned, txn

    # ------------------------------------------------------------------ EndTxn

    def handle_end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                       reply: Any, bump_epoch: bool = False) -> TxnOutcome:
        """Commits or aborts; answers an `EndTxnResult` (see the module docstring for `bump_epoch`)."""
        fx = TxnOutcome()
        if bump_epoch and commit:
            fx.respond(reply, EndTxnResult(Errors.INVALID_REQUEST))
            return fx
        retried = self._retried_bumped_abort(transactional_id, producer_id, producer_epoch) if bump_epoch else None
        if retried is not None:
            fx.respond(reply, retried)
            return fx
        error, partition, owned, txn = self._fenced(transactional_id, producer_id, producer_epoch)
        if txn is not None:
            if txn.pending is not None:
                error = Errors.CONCURRENT_TRANSACTIONS
            elif txn.state == S.ONGOING:
                now_ms = self._clock.time_ms()
                transit = (txn.prepare_bumped_abort(now_ms) if bump_epoch and not txn.is_epoch_exhausted
                           else txn.prepare_abort_or_commit(commit, now_ms))
                self._append(partition, owned, txn, (transit,), "end", reply, fx)
                return fx
            else:
                error = _end_txn_answer(txn.state, commit)
            if error == Errors.NONE:
                fx.respond(reply, EndTxnResult(error, txn.producer_epoch))
                return fx
        fx.respond(reply, EndTxnResult(error))
        return fx

    def _retried_bumped_abort(self, transactional_id: str, producer_id: int,
                              producer_epoch: int) -> EndTxnResult | None:
        """The answer to a retry of an EndTxn abort that bumped `producer_epoch`, or None when the
        request is not one."""
        owned = self._owner(transactional_id)[2] if transactional_id else None
        txn = owned.transactions.get(transactional_id) if owned is not None else None
        if (txn is None or txn.producer_id != producer_id or producer_epoch == NO_PRODUCER_EPOCH
                or txn.bumped_from_epoch != producer_epoch or txn.state not in (S.PREPARE_ABORT, S.COMPLETE_ABORT)):
            return None
        return EndTxnResult(_end_txn_answer(txn.state, commit=False), txn.producer_epoch)

    def on_markers_done(self, markers: TxnMarkers) -> TxnOutcome:
        """Every partition has the transaction's marker: write CompleteCommit / CompleteAbort."""
        fx = TxnOutcome()
        owned = self.partitions.get(markers.txn_partition)
        if owned is None or owned.loading or owned.coordinator_epoch != markers.coordinator_epoch:
            return fx
        txn = owned.transactions.get(markers.transactional_id)
        if (txn is None or txn.pending is not None or txn.state not in _PREPARED
                or (txn.producer_id, txn.producer_epoch) != (markers.producer_id, markers.producer_epoch)):
            return fx
        now_ms = self._clock.time_ms()
        complete = txn.prepare_complete(now_ms)
        parked = self._parked_adds.take(txn.transactional_id, markers.txn_partition, owned.coordinator_epoch,
                                        txn.producer_id, txn.producer_epoch)
        if parked is None:
            self._append(markers.txn_partition, owned, txn, (complete,), "complete", None, fx)
        else:  # the next transaction begins in the same write
            ongoing = txn.after(complete).prepare_add_partitions(parked.partitions, now_ms)
            self._append(markers.txn_partition, owned, txn, (complete, ongoing), "add", parked.reply, fx)
        return fx

    # ------------------------------------------------------------------ appends

    def _append(self, partition: int, owned: TxnPartition, txn: TransactionMetadata,
                transits: tuple[TxnTransit, ...], kind: str, reply: Any, fx: TxnOutcome) -> None:
        self._last_append_id += 1
        txn.pending = transits[-1]
        key = records.encode_key(txn.transactional_id)
        written = [(key, None if kind == "expire" else records.encode_value(transit.value)) for transit in transits]
        self._inflight[self._last_append_id] = _Written(partition, owned.coordinator_epoch, txn.transactional_id,
                                                        transits, kind, reply)
        fx.appends.append(TxnAppend(self._last_append_id, partition, written))

    def on_append_done(self, append_id: int, error_code: int, first_offset: int | None = None) -> TxnOutcome:
        fx = TxnOutcome()
        written = self._inflight.pop(append_id, None)
        if written is None:  # its partition was unloaded meanwhile, and the request answered
            return fx
        owned = self.partitions.get(written.partition)
        txn = owned.transactions.get(written.transactional_id) if owned is not None else None
        if owned is None or owned.coordinator_epoch != written.coordinator_epoch or txn is None \
                or txn.pending != written.transits[-1]:
            fx.respond(written.reply, self._error_result(written.kind, Errors.NOT_COORDINATOR))
            return fx
        if error_code != Errors.NONE:
            txn.pending = None
            logger.warning("Writing transaction %s's %s failed with error %d", txn.transactional_id,
                           " and ".join(t.state.display_name for t in written.transits), error_code)
            fx.respond(written.reply, self._error_result(written.kind, txn_store_error(error_code)))
            if written.kind == "complete":
                parked = self._parked_adds.pop(txn.transactional_id)
                if parked is not None:
                    fx.respond(parked.reply, txn_store_error(error_code))
            return fx
        if written.kind == "expire":
            del owned.transactions[txn.transactional_id]
            return fx
        for transit in written.transits:
            txn.apply(transit)
        if written.kind == "init":
            fx.respond(written.reply, InitProducerIdResult(Errors.NONE, txn.producer_id, txn.producer_epoch))
        elif written.kind == "fence":
            fx.respond(written.reply, InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS))
        elif written.kind == "add":
            fx.respond(written.reply, Errors.NONE)
        elif written.kind == "end":
            fx.respond(written.reply, EndTxnResult(Errors.NONE, txn.producer_epoch))
        elif written.kind == "complete":
            parked = self._parked_adds.take(txn.transactional_id, written.partition, owned.coordinator_epoch,
                                            txn.producer_id, txn.producer_epoch)
            if parked is not None:  # it came while the completion was being written
                transit = txn.prepare_add_partitions(parked.partitions, self._clock.time_ms())
                self._append(written.partition, owned, txn, (transit,), "add", parked.reply, fx)
        if txn.state in _PREPARED:
            fx.markers.append(self._markers(written.partition, owned, txn))
        return fx

    @staticmethod
    def _error_result(kind: str, error_code: int) -> Any:
        if kind in ("init", "fence"):
            return InitProducerIdResult(error_code)
        return EndTxnResult(error_code) if kind == "end" else error_code

    @staticmethod
    def _markers(partition: int, owned: TxnPartition, txn: TransactionMetadata) -> TxnMarkers:
        return TxnMarkers(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                          txn.state == S.PREPARE_COMMIT, owned.coordinator_epoch, partition, txn.partitions)


def _is_completing(txn: TransactionMetadata) -> bool:
    """Whether the transaction is prepared and waits only for its markers and its completion record."""
    return txn.state in _PREPARED and (txn.pending is None or txn.pending.state in (S.COMPLETE_COMMIT,
                                                                                    S.COMPLETE_ABORT))


def _is_valid_producer_id(txn: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: a producer that gives its id and epoch may bump its epoch only if the id is the
    current one (the epoch is checked by the bump), or the previous one whose epochs ran out."""
    return (txn.producer_epoch == NO_PRODUCER_EPOCH or producer_id == txn.producer_id
            or (producer_id == txn.last_producer_id and is_epoch_exhausted(producer_epoch)))


def _end_txn_answer(state: S, commit: bool) -> int:
    """EndTxn's answer for a transaction that is not ongoing (Kafka's endTransaction)."""
    if state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
        return Errors.NONE  # a retry of an EndTxn that completed
    if state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
        return Errors.CONCURRENT_TRANSACTIONS
    return Errors.INVALID_TXN_STATE
