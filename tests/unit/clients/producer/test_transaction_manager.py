"""The transactional producer's decisions (`TransactionManager`, `action_for`): Kafka 3.x's state
machine, which errors are retried, sent to a new coordinator, abortable or fatal, which partitions
must be added before their batches leave, and when an abort must bump the epoch."""

from __future__ import annotations

import pytest

from services.clients.producer.errors import ProducerFencedError, TransactionStateError
from services.clients.producer.transaction_manager import (
    Action,
    TransactionManager,
    TxnState,
    action_for,
    add_partitions_code,
    coordinator_error,
)
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition

A, B = TopicPartition("out", 0), TopicPartition("out", 1)


def ready() -> TransactionManager:
    manager = TransactionManager("tx", 60000)
    manager.begin_init()
    manager.initialized(7, 0)
    return manager


def in_transaction() -> TransactionManager:
    manager = ready()
    manager.begin()
    return manager


def test_a_transaction_goes_from_ready_through_commit_back_to_ready():
    manager = TransactionManager("tx", 60000)
    assert manager.state is TxnState.UNINITIALIZED
    with pytest.raises(TransactionStateError, match="init_transactions"):
        manager.begin()
    with pytest.raises(TransactionStateError, match="init_transactions"):
        manager.check_send()
    manager.begin_init()
    assert manager.state is TxnState.INITIALIZING
    manager.initialized(7, 0)
    assert (manager.state, manager.producer_id, manager.producer_epoch) == (TxnState.READY, 7, 0)
    with pytest.raises(TransactionStateError, match="READY"):
        manager.check_send()
    manager.begin()
    manager.check_send()
    manager.begin_commit()
    assert manager.state is TxnState.COMMITTING_TRANSACTION
    manager.begin_commit()  # a commit that timed out may be called again
    manager.complete_transaction()
    assert manager.state is TxnState.READY


def test_invalid_transitions_are_refused():
    manager = ready()
    for move in (manager.begin_commit, manager.begin_abort, manager.complete_transaction):
        with pytest.raises(TransactionStateError, match="invalid transition"):
            move()
    manager.begin()
    with pytest.raises(TransactionStateError):
        manager.begin()


def test_an_abortable_error_allows_only_an_abort_then_a_new_transaction():
    manager = in_transaction()
    failure = KafkaError("boom", error=Errors.TOPIC_AUTHORIZATION_FAILED)
    manager.batch_failed(Errors.TOPIC_AUTHORIZATION_FAILED, failure)
    assert manager.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(KafkaError) as raised:
        manager.check_send()
    assert raised.value.error_name == "TOPIC_AUTHORIZATION_FAILED"
    with pytest.raises(KafkaError, match="aborted first"):
        manager.begin_commit()
    with pytest.raises(KafkaError, match="aborted first"):
        manager.check_in_transaction("send_offsets_to_transaction")
    manager.begin_abort()
    manager.complete_transaction()
    manager.begin()
    assert manager.state is TxnState.IN_TRANSACTION and manager.last_error is None


def test_a_fatal_error_leaves_nothing_but_close():
    manager = in_transaction()
    fenced = coordinator_error(Errors.PRODUCER_FENCED)
    assert isinstance(fenced, ProducerFencedError)
    manager.fail_for(Action.FATAL, fenced)
    assert manager.state is TxnState.FATAL_ERROR
    for move in (manager.begin_abort, manager.begin_commit, manager.begin, manager.raise_if_error):
        with pytest.raises(ProducerFencedError):
            move()


def test_errors_are_sorted_as_kafka_sorts_them():
    assert action_for(Errors.NONE) is Action.OK
    for code in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NETWORK_EXCEPTION):
        assert action_for(code) is Action.FIND_COORDINATOR
    for code in (Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.CONCURRENT_TRANSACTIONS,
                 Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.REQUEST_TIMED_OUT):
        assert action_for(code) is Action.RETRY
    for code in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID,
                 Errors.GROUP_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED):
        assert action_for(code) is Action.ABORTABLE
    for code in (Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH, Errors.INVALID_TXN_STATE,
                 Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_PRODUCER_ID_MAPPING):
        assert action_for(code) is Action.FATAL
    assert isinstance(coordinator_error(Errors.INVALID_PRODUCER_EPOCH), ProducerFencedError)


def test_add_partitions_answers_are_decided_by_their_real_failure():
    assert add_partitions_code([Errors.NONE, Errors.NONE]) == Errors.NONE
    assert add_partitions_code([Errors.OPERATION_NOT_ATTEMPTED, Errors.TOPIC_AUTHORIZATION_FAILED]) == \
        Errors.TOPIC_AUTHORIZATION_FAILED
    assert add_partitions_code([Errors.OPERATION_NOT_ATTEMPTED]) == Errors.OPERATION_NOT_ATTEMPTED


def test_partitions_are_added_once_per_transaction_and_only_while_sending():
    manager = in_transaction()
    assert manager.partitions_to_add([B, A]) == [A, B]
    assert not manager.transaction_started
    manager.partitions_added([A])
    assert manager.partitions_to_add([A, B]) == [B]
    assert manager.transaction_started and manager.sending_allowed()
    manager.begin_abort()
    assert manager.partitions_to_add([B]) == [] and not manager.sending_allowed()
    manager.complete_transaction()
    manager.begin()
    assert manager.partitions_to_add([A]) == [A] and not manager.transaction_started


def test_a_failed_send_is_abortable_but_a_fenced_or_unauthorized_one_is_fatal():
    manager = in_transaction()
    manager.batch_failed(Errors.INVALID_PRODUCER_EPOCH, KafkaError(error=Errors.INVALID_PRODUCER_EPOCH))
    assert manager.state is TxnState.ABORTABLE_ERROR and manager.epoch_bump_required
    for code in (Errors.PRODUCER_FENCED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
        manager = in_transaction()
        manager.batch_failed(code, KafkaError.from_code(code))
        assert manager.state is TxnState.FATAL_ERROR


def test_failures_while_aborting_do_not_change_the_state_and_the_bump_resets():
    manager = in_transaction()
    manager.begin_abort()
    manager.batch_failed(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError(error=Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))
    assert manager.state is TxnState.ABORTING_TRANSACTION and manager.epoch_bump_required
    manager.initialized(7, 1)
    assert not manager.epoch_bump_required and manager.producer_epoch == 1
    manager.complete_transaction()
    assert manager.state is TxnState.READY


def test_an_error_while_initializing_is_fatal():
    manager = TransactionManager("tx", 60000)
    manager.begin_init()
    manager.fail_for(Action.ABORTABLE, KafkaError(error=Errors.GROUP_AUTHORIZATION_FAILED))
    assert manager.state is TxnState.FATAL_ERROR


def test_the_first_add_of_a_transaction_retries_soon_while_the_previous_one_completes():
    manager = in_transaction()
    assert manager.add_partitions_backoff_ms(Errors.CONCURRENT_TRANSACTIONS, 100) == 20
    assert manager.add_partitions_backoff_ms(Errors.COORDINATOR_LOAD_IN_PROGRESS, 100) == 100
    manager.partitions_added([A])
    assert manager.add_partitions_backoff_ms(Errors.CONCURRENT_TRANSACTIONS, 100) == 100
    assert manager.add_partitions_backoff_ms(Errors.CONCURRENT_TRANSACTIONS, 10) == 10
