"""`odradek transactions`: kafka-transactions.sh (KIP-664) on the admin client.

    --list                                 TransactionalId Coordinator ProducerId TransactionState
    --describe --transactional-id T        CoordinatorId TransactionalId ProducerId ProducerEpoch
                                           TransactionState TransactionTimeoutMs
                                           CurrentTransactionStartTimeMs TransactionDurationMs
                                           TopicPartitions
    --find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]
        Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp
        Duration(min): open transactions older than the timeout (15 minutes by default) that their
        coordinator does not know as ongoing on that partition
    --abort --topic T --partition P (--producer-id ID --producer-epoch E --coordinator-epoch C |
                                     --start-offset O)
        writes an ABORT marker for that producer (or the one whose open transaction starts at O)
        on that partition

A failure prints `Error: <message>` and exits with 1.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Mapping
from typing import TextIO

from services.clients.admin import Admin
from services.clients.admin_types import AbortTransactionSpec, ProducerState, TransactionDescription
from services.clients.cli_groups import print_table, run_admin_command
from services.common.errors import KafkaError
from services.common.topic_partition import TopicPartition

ACTIONS = ("list", "describe", "find-hanging", "abort")
MS_PER_MINUTE = 60_000
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15


class TransactionsCommandError(Exception):
    """A user error the Kafka tool reports before doing anything."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("transactions", help="list, describe, find hanging or abort transactions",
                                   description="List, describe, find hanging or abort transactions.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--command-config", metavar="FILE", help="a properties file of admin client configs")
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in ACTIONS:
        actions.add_argument(f"--{action}", dest="action", action="store_const", const=action)
    parser.add_argument("--transactional-id", help="the transactional id to describe")
    parser.add_argument("--broker-id", type=int, help="find hanging transactions on this broker's partitions")
    parser.add_argument("--topic", help="the topic (find-hanging, abort)")
    parser.add_argument("--partition", type=int, help="the partition (find-hanging, abort)")
    parser.add_argument("--producer-id", type=int, help="the producer of the transaction to abort")
    parser.add_argument("--producer-epoch", type=int, help="its epoch")
    parser.add_argument("--coordinator-epoch", type=int, help="its coordinator epoch (from find-hanging)")
    parser.add_argument("--start-offset", type=int,
                        help="abort the open transaction starting at this offset (instead of the producer options)")
    parser.add_argument("--max-transaction-timeout", type=int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                        metavar="MINUTES", help="open transactions older than this are candidates (find-hanging)")
    parser.add_argument("--timeout", type=int, default=5000, help="milliseconds to wait for answers")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, out: TextIO) -> int:
    return run_admin_command(args, out, COMMANDS[args.action], TransactionsCommandError)


def run_list(admin: Admin, _args: argparse.Namespace, out: TextIO) -> None:
    rows = [("TransactionalId", "Coordinator", "ProducerId", "TransactionState")]
    for coordinator_id, listings in sorted(admin.list_transactions_by_coordinator().items()):
        rows += [(t.transactional_id, coordinator_id, t.producer_id, t.state) for t in listings]
    print_table(rows, out)


def run_describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    if not args.transactional_id:
        raise TransactionsCommandError("Option [--transactional-id] is required with [--describe].")
    described = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    print_table([DESCRIBE_HEADER, describe_row(args.transactional_id, described, int(time.time() * 1000))], out)


DESCRIBE_HEADER = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                   "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                   "TopicPartitions")


def describe_row(transactional_id: str, t: TransactionDescription, now_ms: int) -> tuple:
    started = t.transaction_start_time_ms
    duration = now_ms - started if started >= 0 else None
    partitions = ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(t.topic_partitions))
    return (t.coordinator_id, transactional_id, t.producer_id, t.producer_epoch, t.state,
            t.transaction_timeout_ms, started if started >= 0 else None, duration, partitions)


def run_find_hanging(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    partitions = _candidate_partitions(admin, args)
    producers = admin.describe_producers(partitions, raise_errors=False)
    now_ms = int(time.time() * 1000)
    open_txns = old_open_transactions(producers, args.max_transaction_timeout * MS_PER_MINUTE, now_ms)
    known: dict[int, TransactionDescription] = {}
    if open_txns:
        listings = admin.list_transactions(producer_ids={state.producer_id for _, state in open_txns})
        described = admin.describe_transactions(t.transactional_id for t in listings) if listings else {}
        known = {d.producer_id: d for d in described.values()}
    rows = [("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
             "LastTimestamp", "Duration(min)")]
    for tp, state in hanging(open_txns, known):
        rows.append((tp.topic, tp.partition, state.producer_id, state.producer_epoch, state.coordinator_epoch,
                     state.current_transaction_start_offset, state.last_timestamp,
                     (now_ms - state.last_timestamp) // MS_PER_MINUTE))
    print_table(rows, out)


def _candidate_partitions(admin: Admin, args: argparse.Namespace) -> list[TopicPartition]:
    if args.topic is not None:
        if args.partition is not None:
            return [TopicPartition(args.topic, args.partition)]
        description = admin.describe_topics([args.topic])[args.topic]
        return [TopicPartition(args.topic, p.partition) for p in description.partitions]
    if args.broker_id is None:
        raise TransactionsCommandError("Option [--find-hanging] needs [--broker-id] or [--topic].")
    descriptions = admin.describe_topics(admin.list_topics())
    return sorted(TopicPartition(d.name, p.partition) for d in descriptions.values()
                  for p in d.partitions if args.broker_id in p.replicas)


def old_open_transactions(producers: Mapping[TopicPartition, list[ProducerState] | KafkaError],
                          max_timeout_ms: int, now_ms: int) -> list[tuple[TopicPartition, ProducerState]]:
    """The open transactions whose producer wrote nothing for longer than `max_timeout_ms`."""
    found = []
    for tp, states in sorted(producers.items()):
        if isinstance(states, KafkaError):
            continue
        found += [(tp, s) for s in states
                  if s.current_transaction_start_offset >= 0 and now_ms - s.last_timestamp > max_timeout_ms]
    return found


def hanging(open_txns: Iterable[tuple[TopicPartition, ProducerState]],
            known: Mapping[int, TransactionDescription]) -> list[tuple[TopicPartition, ProducerState]]:
    """Open transactions their coordinator does not know as ongoing on that partition, with that
    producer epoch or a later one."""
    result = []
    for tp, state in open_txns:
        description = known.get(state.producer_id)
        if (description is None or description.state != "Ongoing" or tp not in description.topic_partitions
                or description.producer_epoch < state.producer_epoch):
            result.append((tp, state))
    return result


def run_abort(admin: Admin, args: argparse.Namespace, _out: TextIO) -> None:
    if args.topic is None or args.partition is None:
        raise TransactionsCommandError("Option [--abort] needs --topic and --partition.")
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is not None:
        admin.abort_transaction(spec_at_start_offset(tp, admin.describe_producers([tp])[tp], args.start_offset))
        return
    needed = ("producer_id", "producer_epoch", "coordinator_epoch")
    missing = [f"--{name.replace('_', '-')}" for name in needed if getattr(args, name) is None]
    if missing:
        raise TransactionsCommandError(f"Option [--abort] needs --start-offset or {', '.join(missing)}.")
    admin.abort_transaction(AbortTransactionSpec(tp, args.producer_id, args.producer_epoch, args.coordinator_epoch))


def spec_at_start_offset(tp: TopicPartition, producers: list[ProducerState], start_offset: int) -> AbortTransactionSpec:
    """The abort of the open transaction starting at `start_offset`, from the partition's producers."""
    for state in producers:
        if state.current_transaction_start_offset == start_offset:
            return AbortTransactionSpec(tp, state.producer_id, state.producer_epoch, max(state.coordinator_epoch, 0))
    raise TransactionsCommandError(f"Could not find any open transactions starting at offset {start_offset} on "
                                   f"partition {tp.topic}-{tp.partition}")


COMMANDS = {"list": run_list, "describe": run_describe, "find-hanging": run_find_hanging, "abort": run_abort}
