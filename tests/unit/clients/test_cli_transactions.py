"""`odradek transactions`' own decisions: which open transactions are old enough to be candidates,
and which of those are hanging (unknown to their coordinator as ongoing on that partition), as
kafka-transactions.sh's find-hanging decides; the options `--abort` and `--describe` need."""

from __future__ import annotations

import io

import pytest

from services.clients import cli
from services.clients.admin_types import AbortTransactionSpec, ProducerState, TransactionDescription
from services.clients.cli_transactions import (
    TransactionsCommandError,
    describe_row,
    hanging,
    old_open_transactions,
    spec_at_start_offset,
)
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition

TP = TopicPartition("out", 0)
NOW_MS = 10 * 60 * 60_000
MINUTE_MS = 60_000


def producer(producer_id: int, start_offset: int, idle_minutes: int, epoch: int = 3) -> ProducerState:
    return ProducerState(producer_id, epoch, 5, NOW_MS - idle_minutes * MINUTE_MS, 2, start_offset)


def description(state: str, partitions=(TP,), epoch: int = 3) -> TransactionDescription:
    return TransactionDescription(1, state, 7, epoch, 60000, NOW_MS - 1000, frozenset(partitions))


def test_only_open_transactions_idle_longer_than_the_timeout_are_candidates():
    producers = {TP: [producer(7, 40, 20), producer(8, -1, 30), producer(9, 41, 5)],
                 TopicPartition("out", 1): KafkaError(error=Errors.NOT_LEADER_OR_FOLLOWER)}
    assert old_open_transactions(producers, 15 * MINUTE_MS, NOW_MS) == [(TP, producer(7, 40, 20))]


def test_a_transaction_its_coordinator_does_not_know_as_ongoing_there_is_hanging():
    candidate = [(TP, producer(7, 40, 20))]
    assert hanging(candidate, {}) == candidate
    assert hanging(candidate, {7: description("CompleteAbort")}) == candidate
    assert hanging(candidate, {7: description("Ongoing", partitions=[TopicPartition("out", 1)])}) == candidate
    assert hanging(candidate, {7: description("Ongoing", epoch=2)}) == candidate
    assert hanging(candidate, {7: description("Ongoing")}) == []


def test_describe_rows_show_the_duration_of_an_ongoing_transaction():
    row = describe_row("tx", description("Ongoing"), NOW_MS)
    assert row == (1, "tx", 7, 3, "Ongoing", 60000, NOW_MS - 1000, 1000, "out-0")
    idle = TransactionDescription(1, "Empty", 7, 3, 60000, -1, frozenset())
    assert describe_row("tx", idle, NOW_MS)[6:] == (None, None, "")


def test_abort_and_describe_name_the_options_they_miss():
    out = io.StringIO()
    code = _run(["--abort", "--topic", "out", "--partition", "0"], out)
    assert code == 1 and "--start-offset or --producer-id, --producer-epoch, --coordinator-epoch" in out.getvalue()
    out = io.StringIO()
    assert _run(["--describe"], out) == 1 and "--transactional-id" in out.getvalue()


def _run(arguments: list[str], out: io.StringIO) -> int:
    parser = cli.build_parser()
    args = parser.parse_args(["transactions", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1000", *arguments])
    return args.run(args, out)


def test_abort_by_start_offset_finds_the_producer_of_that_transaction():
    producers = [producer(7, 40, 20), producer(8, 55, 20, epoch=9)]
    assert spec_at_start_offset(TP, producers, 55) == AbortTransactionSpec(TP, 8, 9, 2)
    with pytest.raises(TransactionsCommandError, match="starting at offset 41"):
        spec_at_start_offset(TP, producers, 41)
