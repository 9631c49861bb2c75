"""The transaction coordinator core: InitProducerId, AddPartitionsToTxn, EndTxn and their errors,
markers and completion, as Kafka 2.8's TransactionCoordinator answers them."""

from __future__ import annotations

from services.common.errors import Errors
from services.common.shared_types import InitProducerIdResult
from services.coordinator.txn.metadata import MAX_PRODUCER_EPOCH
from tests.unit.coordinator.txn.support import T0, T1, TXN, Driver


def test_first_init_allocates_a_producer_id_then_bumps_the_epoch():
    d = Driver()
    d.own()
    assert d.init() == InitProducerIdResult(Errors.NONE, 1000, 0)
    assert d.init() == InitProducerIdResult(Errors.NONE, 1000, 1)
    assert d.state() == "Empty"


def test_init_checks_its_arguments():
    d = Driver()
    d.own()
    assert d.init("").error_code == Errors.INVALID_REQUEST
    assert d.init(timeout_ms=900001).error_code == Errors.INVALID_TRANSACTION_TIMEOUT
    assert d.init(timeout_ms=0).error_code == Errors.INVALID_TRANSACTION_TIMEOUT
    assert d.init(producer_id=5).error_code == Errors.INVALID_REQUEST
    assert d.init(timeout_ms=900000).error_code == Errors.NONE


def test_init_without_transactional_id_hands_out_a_producer_id():
    d = Driver()
    assert d.init(None) == InitProducerIdResult(Errors.NONE, 1000, 0)
    assert d.init(None) == InitProducerIdResult(Errors.NONE, 1001, 0)


def test_not_owned_and_loading_partitions():
    d = Driver()
    assert d.init().error_code == Errors.NOT_COORDINATOR
    d.core.begin_loading(d.core.partition_for(TXN), 0)
    assert d.init().error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert d.add(1000, 0) == Errors.COORDINATOR_LOAD_IN_PROGRESS
    d.core.complete_loading(d.core.partition_for(TXN))
    assert d.init().error_code == Errors.NONE
    d.core.unload(d.core.partition_for(TXN))
    assert d.end(1000, 0) == Errors.NOT_COORDINATOR


def test_kip360_retry_and_fencing_on_init():
    d = Driver()
    d.own()
    d.init()
    assert d.init(producer_id=1000, producer_epoch=0) == InitProducerIdResult(Errors.NONE, 1000, 1)
    # a retry of that bump (the producer never saw the answer) gets the same epoch again
    assert d.init(producer_id=1000, producer_epoch=0) == InitProducerIdResult(Errors.NONE, 1000, 1)
    assert d.init(producer_id=1000, producer_epoch=7).error_code == Errors.PRODUCER_FENCED
    assert d.init(producer_id=4242, producer_epoch=1).error_code == Errors.PRODUCER_FENCED


def test_an_exhausted_epoch_gets_a_new_producer_id():
    d = Driver()
    d.own()
    d.init()
    txn = d.core.partitions[d.core.partition_for(TXN)].transactions[TXN]
    txn.producer_epoch = MAX_PRODUCER_EPOCH - 1
    assert d.init(producer_id=1000, producer_epoch=MAX_PRODUCER_EPOCH - 1) == InitProducerIdResult(
        Errors.NONE, 1001, 0)
    assert txn.last_producer_id == 1000


def test_a_transaction_commits_through_markers():
    d = Driver()
    d.own()
    pid, epoch = d.init()[1:3]
    assert d.add(pid, epoch, [T0]) == Errors.NONE
    assert d.add(pid, epoch, [T0]) == Errors.NONE  # already there: answered at once
    assert d.carry(d.core.handle_add_partitions(TXN, pid, epoch, [T0], object())).appends == []
    assert d.add(pid, epoch, [T1]) == Errors.NONE
    assert d.state() == "Ongoing"
    assert d.end(pid, epoch, commit=True) == Errors.NONE
    assert d.state() == "PrepareCommit"
    (markers,) = d.markers
    assert markers.commit and markers.partitions == frozenset({T0, T1}) and markers.coordinator_epoch == 0
    assert (markers.producer_id, markers.producer_epoch) == (pid, epoch)
    assert d.end(pid, epoch, commit=True) == Errors.CONCURRENT_TRANSACTIONS
    assert d.end(pid, epoch, commit=False) == Errors.INVALID_TXN_STATE
    assert d.add(pid + 1, epoch, [T0]) == Errors.INVALID_PRODUCER_ID_MAPPING  # not parked (test_parked_adds)
    assert d.init().error_code == Errors.CONCURRENT_TRANSACTIONS
    d.finish_markers()
    assert d.state() == "CompleteCommit"
    assert d.end(pid, epoch, commit=True) == Errors.NONE  # a retry after it completed
    assert d.end(pid, epoch, commit=False) == Errors.INVALID_TXN_STATE
    described = d.core.handle_describe_transaction(TXN)
    assert described.partitions == ()


def test_abort_and_its_retries():
    d = Driver()
    d.own()
    pid, epoch = d.init()[1:3]
    assert d.end(pid, epoch, commit=False) == Errors.INVALID_TXN_STATE  # nothing to end while Empty
    d.add(pid, epoch)
    assert d.end(pid, epoch, commit=False) == Errors.NONE
    assert d.end(pid, epoch, commit=False) == Errors.CONCURRENT_TRANSACTIONS
    assert d.end(pid, epoch, commit=True) == Errors.INVALID_TXN_STATE
    d.finish_markers()
    assert d.state() == "CompleteAbort"
    assert d.end(pid, epoch, commit=False) == Errors.NONE
    assert d.add(pid, epoch) == Errors.NONE and d.state() == "Ongoing"  # the next transaction


def test_fencing_by_producer_id_and_epoch():
    d = Driver()
    d.own()
    pid, epoch = d.init()[1:3]
    d.init()
    assert d.add(pid, epoch) == Errors.PRODUCER_FENCED
    assert d.end(pid, epoch) == Errors.PRODUCER_FENCED
    assert d.add(pid + 1, epoch + 1) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert d.add(pid, epoch + 1, transactional_id="unknown") in (Errors.INVALID_PRODUCER_ID_MAPPING,
                                                                 Errors.NOT_COORDINATOR)
    assert d.add(pid, epoch, transactional_id="") == Errors.INVALID_REQUEST
    assert d.end(pid, epoch, transactional_id="") == Errors.INVALID_REQUEST


def test_init_during_an_ongoing_transaction_aborts_it_and_fences_the_producer():
    d = Driver()
    d.own()
    pid, epoch = d.init()[1:3]
    d.add(pid, epoch)
    assert d.init().error_code == Errors.CONCURRENT_TRANSACTIONS
    assert d.state() == "PrepareAbort"
    (markers,) = d.markers
    assert not markers.commit and markers.producer_epoch == epoch + 1
    assert d.end(pid, epoch) == Errors.PRODUCER_FENCED
    d.finish_markers()
    assert d.state() == "CompleteAbort"
    assert d.init() == InitProducerIdResult(Errors.NONE, pid, epoch + 2)


def test_a_write_in_flight_answers_concurrent_transactions():
    d = Driver()
    d.own()
    pid, epoch = d.init()[1:3]
    outcome = d.core.handle_add_partitions(TXN, pid, epoch, [T0], object())
    assert d.add(pid, epoch, [T1]) == Errors.CONCURRENT_TRANSACTIONS
    assert d.end(pid, epoch) == Errors.CONCURRENT_TRANSACTIONS
    assert d.init().error_code == Errors.CONCURRENT_TRANSACTIONS
    assert d.answer(outcome) == Errors.NONE


def test_failed_writes_change_nothing_and_map_errors_as_kafka():
    d = Driver()
    d.own()
    pid, epoch = d.init()[1:3]
    assert d.add(pid, epoch, error_code=Errors.NOT_ENOUGH_REPLICAS) == Errors.COORDINATOR_NOT_AVAILABLE
    assert d.state() == "Empty"
    assert d.add(pid, epoch, error_code=Errors.NOT_LEADER_OR_FOLLOWER) == Errors.NOT_COORDINATOR
    assert d.init(error_code=Errors.REQUEST_TIMED_OUT).error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert d.init() == InitProducerIdResult(Errors.NONE, pid, epoch + 1)


def test_unloading_answers_writes_in_flight_not_coordinator():
    d = Driver()
    partition = d.own()
    pid, epoch = d.init()[1:3]
    outcome = d.core.handle_add_partitions(TXN, pid, epoch, [T0], object())
    unloaded = d.core.unload(partition)
    assert [result for _, result in unloaded.responses] == [Errors.NOT_COORDINATOR]
    assert d.core.on_append_done(outcome.appends[0].append_id, Errors.NONE).responses == []


def test_list_transactions_filters():
    d = Driver()
    d.own()
    d.own("other")
    pid = d.init()[1]
    d.init("other")
    d.add(pid, 0)
    code, unknown, listed = d.core.handle_list_transactions({"Ongoing", "Bogus"}, set())
    assert code == Errors.NONE and unknown == ["Bogus"] and listed == [(TXN, pid, "Ongoing")]
    assert len(d.core.handle_list_transactions(set(), set())[2]) == 2
    assert d.core.handle_list_transactions(set(), {pid})[2] == [(TXN, pid, "Ongoing")]
    d.clock.advance(1000)  # the ongoing transaction has run 1 s; "other" began none (its start is -1)
    assert d.core.handle_list_transactions({"Ongoing"}, set(), 999)[2] == [(TXN, pid, "Ongoing")]
    assert d.core.handle_list_transactions({"Ongoing"}, set(), 1000)[2] == []
    assert d.core.handle_describe_transaction("nope").error_code in (Errors.TRANSACTIONAL_ID_NOT_FOUND,
                                                                      Errors.NOT_COORDINATOR)
