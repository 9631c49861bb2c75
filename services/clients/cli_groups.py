"""`odradek consumer-groups`: kafka-consumer-groups.sh (Kafka 2.8) on the admin client.

    --list [--state]                       group ids (with --state: GROUP and STATE columns)
    --describe --group G [--members | --state]
        default (offsets): GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST
        CLIENT-ID, one row per partition the group has an offset for or a member is assigned;
        --members: GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS;
        --state: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
    --reset-offsets --group G (--topic T[:P,P...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
         | --to-datetime YYYY-MM-DDTHH:mm:SS.sss[TZ] | --by-duration PnDTnHnMnS)
    --reset-offsets --group G --from-file CSV     CSV lines `topic,partition,offset` (one group) or
                                                  `group,topic,partition,offset`
        [--dry-run | --execute] [--export]  prints GROUP TOPIC PARTITION NEW-OFFSET (with --export:
                                            the CSV --from-file reads); only --execute commits,
                                            and only for a group with no active members
    --delete --group G                      deletes an empty group and its offsets
    --delete-offsets --group G --topic T[:P,P...] ...
                                            deletes the group's committed offsets of those
                                            partitions; refused (GROUP_SUBSCRIBED_TO_TOPIC) for a
                                            topic an active group is subscribed to

A datetime without a zone is UTC; `--to-datetime` and `--by-duration` take each partition's first
offset whose timestamp is at or after the time (the log end offset when there is none).

Columns are padded as Kafka pads them (each as wide as its widest cell). A failure prints
`Error: <message>` and exits with 1.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, NamedTuple, TextIO

from services.clients.admin import Admin
from services.clients.admin_types import ConsumerGroupDescription, MemberDescription
from services.common.config import load_properties
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from services.clients.consumer.records import OffsetAndMetadata

ACTIONS = ("list", "describe", "reset-offsets", "delete", "delete-offsets")
RESET_SPECS = ("to-earliest", "to-latest", "to-current", "to-offset", "shift-by", "to-datetime", "by-duration",
               "from-file")
INACTIVE_STATES = ("Empty", "Dead")


class GroupCommandError(Exception):
    """A user error the Kafka tool reports before doing anything."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("consumer-groups", help="list, describe, reset or delete consumer groups",
                                   description="List, describe, reset offsets of, or delete consumer groups.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--command-config", metavar="FILE", help="a properties file of admin client configs")
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in ACTIONS:
        actions.add_argument(f"--{action}", dest="action", action="store_const", const=action)
    parser.add_argument("--group", action="append", default=[], help="the group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group (describe, delete)")
    parser.add_argument("--members", action="store_true", help="describe the members")
    parser.add_argument("--state", action="store_true", help="describe or list the groups' states")
    parser.add_argument("--offsets", action="store_true", help="describe the offsets (the default)")
    parser.add_argument("--topic", action="append", default=[], metavar="T[:P,P]",
                        help="topic (and partitions) to reset")
    parser.add_argument("--all-topics", action="store_true", help="reset every topic the group has offsets for")
    specs = parser.add_mutually_exclusive_group()
    specs.add_argument("--to-earliest", dest="reset", action="store_const", const=("to-earliest", None))
    specs.add_argument("--to-latest", dest="reset", action="store_const", const=("to-latest", None))
    specs.add_argument("--to-current", dest="reset", action="store_const", const=("to-current", None))
    specs.add_argument("--to-offset", dest="reset", type=lambda v: ("to-offset", int(v)), metavar="N")
    specs.add_argument("--shift-by", dest="reset", type=lambda v: ("shift-by", int(v)), metavar="N")
    specs.add_argument("--to-datetime", dest="reset", type=lambda v: ("to-datetime", v),
                       metavar="YYYY-MM-DDTHH:mm:SS.sss", help="reset to the offset of a datetime (UTC without a zone)")
    specs.add_argument("--by-duration", dest="reset", type=lambda v: ("by-duration", v), metavar="PnDTnHnMnS",
                       help="reset to the offset of that long before now")
    specs.add_argument("--from-file", dest="reset", type=lambda v: ("from-file", v), metavar="CSV",
                       help="reset to the offsets of a CSV file (as --export prints)")
    parser.add_argument("--export", action="store_true", help="print the reset plan as CSV")
    parser.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    parser.add_argument("--timeout", type=int, default=5000, help="milliseconds to wait for answers")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, out: TextIO) -> int:
    return run_admin_command(args, out, COMMANDS[args.action], GroupCommandError)


def run_admin_command(args: argparse.Namespace, out: TextIO,
                      command: Callable[[Admin, argparse.Namespace, TextIO], int | None],
                      user_error: type[Exception]) -> int:
    """Runs an admin tool's `command` with an Admin from --bootstrap-server, --command-config and
    --timeout and returns its exit code (0 when it returns None); a failure prints
    `Error: <message>` and returns 1, as Kafka's tools do."""
    config = load_properties(args.command_config) if args.command_config else {}
    try:
        with Admin(config, bootstrap_servers=args.bootstrap_server,
                   default_api_timeout_ms=max(args.timeout, 1000)) as admin:
            return command(admin, args, out) or 0
    except (KafkaError, user_error, ValueError, TimeoutError) as error:
        message = error.args[0] if error.args else str(error)
        print(f"Error: {message}", file=out)
        return 1


def print_table(rows: Sequence[Sequence[object]], out: TextIO) -> None:
    cells = [["-" if value is None else str(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        print(" ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out)


def _groups(admin: Admin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_consumer_groups()]
    if not args.group:
        raise GroupCommandError("Option [--group] or [--all-groups] is required.")
    return args.group


# --------------------------------------------------------------------------------------------- list

def run_list(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    listings = admin.list_consumer_groups()
    if args.state:
        print_table([("GROUP", "STATE")] + [(g.group_id, g.state) for g in listings], out)
        return
    for listing in listings:
        print(listing.group_id, file=out)


# --------------------------------------------------------------------------------------------- describe

def run_describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    for group_id in _groups(admin, args):
        description = admin.describe_consumer_groups([group_id])[group_id]
        if args.state:
            coordinator = description.coordinator
            where = f"{coordinator.host}:{coordinator.port} ({coordinator.node_id})" if coordinator else "-"
            print_table([("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                         (group_id, where, description.partition_assignor or "", description.state,
                          len(description.members))], out)
        elif args.members:
            if not description.members:
                print(f"\nConsumer group '{group_id}' has no active members.", file=out)
                continue
            rows = [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")]
            rows += [(group_id, m.member_id, m.host, m.client_id, len(m.assignment)) for m in description.members]
            print_table(rows, out)
        else:
            _describe_offsets(admin, group_id, description, out)
        print(file=out)


class PartitionOffsets(NamedTuple):
    """One row of `--describe`: a partition the group has an offset for or a member is assigned."""

    partition: TopicPartition
    current_offset: int | None  # None: nothing committed
    log_end_offset: int | None  # None: the partition's leader did not answer
    member: MemberDescription | None

    @property
    def lag(self) -> int | None:
        """The log end offset less the committed offset, as kafka-consumer-groups.sh shows it."""
        if self.log_end_offset is None or self.current_offset is None:
            return None
        return self.log_end_offset - self.current_offset


def described_partitions(committed: Mapping[TopicPartition, object],
                         description: ConsumerGroupDescription) -> list[TopicPartition]:
    """The partitions `--describe` shows: committed to or assigned, in partition order."""
    return sorted(set(committed) | {tp for member in description.members for tp in member.assignment})


def partition_offsets(description: ConsumerGroupDescription, committed: Mapping[TopicPartition, OffsetAndMetadata],
                      log_end: Mapping[TopicPartition, object]) -> list[PartitionOffsets]:
    """The rows of `--describe` from the group, its committed offsets and the partitions' log end
    offsets (`Admin.list_offsets(..., raise_errors=False)` results: a KafkaError is no offset)."""
    owners = {tp: member for member in description.members for tp in member.assignment}
    rows = []
    for tp in described_partitions(committed, description):
        result = log_end.get(tp)
        end = None if result is None or isinstance(result, KafkaError) else result.offset
        current = committed[tp].offset if tp in committed else None
        rows.append(PartitionOffsets(tp, current, end, owners.get(tp)))
    return rows


def describe_partition_offsets(admin: Admin, group_id: str,
                               description: ConsumerGroupDescription) -> list[PartitionOffsets]:
    """`--describe`'s rows of one group, read from the cluster."""
    committed = admin.list_consumer_group_offsets(group_id)
    partitions = described_partitions(committed, description)
    log_end = admin.list_offsets(dict.fromkeys(partitions, "latest"), raise_errors=False) if partitions else {}
    return partition_offsets(description, committed, log_end)


def _describe_offsets(admin: Admin, group_id: str, description: ConsumerGroupDescription, out: TextIO) -> None:
    offsets = describe_partition_offsets(admin, group_id, description)
    if description.state == "Dead" and not offsets:
        raise GroupCommandError(f"Consumer group '{group_id}' does not exist.")
    if not description.members:
        print(f"\nConsumer group '{group_id}' has no active members.", file=out)
    if not offsets:
        return
    rows: list[tuple[object, ...]] = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                       "CONSUMER-ID", "HOST", "CLIENT-ID")]
    for row in offsets:
        member = row.member
        rows.append((group_id, row.partition.topic, row.partition.partition, row.current_offset,
                     row.log_end_offset, row.lag, member.member_id if member else None,
                     member.host if member else None, member.client_id if member else None))
    print_table(rows, out)


# --------------------------------------------------------------------------------------------- reset

def parse_topic_partitions(values: Iterable[str]) -> tuple[list[str], list[TopicPartition]]:
    """`--topic t` (whole topics) and `--topic t:0,2` (some partitions)."""
    topics, partitions = [], []
    for value in values:
        topic, sep, indexes = value.partition(":")
        if not sep:
            topics.append(topic)
            continue
        partitions.extend(TopicPartition(topic, int(i)) for i in indexes.split(",") if i.strip())
    return topics, partitions


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)?")
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?"
                       r"(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_datetime_ms(text: str) -> int:
    """`--to-datetime`: `YYYY-MM-DDTHH:mm:SS.sss` with an optional zone (`Z`, `+hh`, `+hhmm` or
    `+hh:mm`; UTC without one) -> milliseconds since the epoch."""
    if "T" not in text:
        raise ValueError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    match = _DATETIME.fullmatch(text)
    if match is None:
        raise ValueError(f'Unparseable date: "{text}"')
    year, month, day, hour, minute, second, millis = (int(match[i]) for i in range(1, 8))
    zone = match[8] or "Z"
    offset = timedelta(0)
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        if zone[0] == "-":
            offset = -offset
    try:
        moment = datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=timezone(offset))
    except ValueError:
        raise ValueError(f'Unparseable date: "{text}"') from None
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def parse_duration_ms(text: str) -> int:
    """`--by-duration`: an ISO-8601 duration of days, hours, minutes and seconds (`PnDTnHnMn.nS`,
    as java.time.Duration reads it) -> milliseconds."""
    match = _DURATION.fullmatch(text)
    time_part = text.upper().partition("T")[2] if match else ""
    if match is None or all(match[i] is None for i in range(2, 6)) or ("T" in text.upper() and not time_part):
        raise ValueError("Text cannot be parsed to a Duration")
    days, hours, minutes, seconds = (int(match[i] or 0) for i in range(2, 6))
    fraction_ms = int((match[6] or "").ljust(3, "0")[:3])
    if match[5] is not None and match[5].startswith("-"):
        fraction_ms = -fraction_ms
    total_ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + fraction_ms
    return -total_ms if match[1] == "-" else total_ms


def parse_reset_plan(text: str, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
    """`--from-file`: lines `topic,partition,offset` for the one group asked for, or
    `group,topic,partition,offset` -> {group: {partition: offset}}."""
    plan: dict[str, dict[TopicPartition, int]] = {}
    for number, fields in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not fields or not "".join(fields).strip():
            continue
        if len(fields) == 3 and len(groups) == 1:
            group_id, (topic, partition, offset) = groups[0], fields
        elif len(fields) == 4:
            group_id, topic, partition, offset = fields
        else:
            raise GroupCommandError(f"Line {number} of the reset plan is not 'topic,partition,offset' (for one "
                                    f"group) or 'group,topic,partition,offset': {','.join(fields)}")
        try:
            plan.setdefault(group_id.strip(), {})[TopicPartition(topic.strip(), int(partition))] = int(offset)
        except ValueError:
            raise GroupCommandError(f"Line {number} of the reset plan has a partition or offset that is not a "
                                    f"number: {','.join(fields)}") from None
    return plan


def export_reset_plan(plan: Mapping[str, Mapping[TopicPartition, int]], with_group: bool) -> str:
    """The CSV `--export` prints and `--from-file` reads, one line per partition."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for group_id, offsets in plan.items():
        for tp, offset in sorted(offsets.items()):
            row = (tp.topic, tp.partition, offset)
            writer.writerow((group_id, *row) if with_group else row)
    return out.getvalue()


def run_reset_offsets(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    if args.reset is None:
        raise GroupCommandError("One of the reset scenarios must be given: " +
                                ", ".join(f"--{s}" for s in RESET_SPECS))
    kind, value = args.reset
    if kind == "to-datetime":
        parse_datetime_ms(value)  # a malformed time fails before anything is asked
    elif kind == "by-duration":
        parse_duration_ms(value)
    from_file = kind == "from-file"
    if not from_file and not args.topic and not args.all_topics:
        raise GroupCommandError("One of [--topic] or [--all-topics] is required with --reset-offsets.")
    groups = _groups(admin, args)
    file_plan = parse_reset_plan(_read_text(value), groups) if from_file else {}
    plan: dict[str, dict[TopicPartition, int]] = {}
    for group_id in groups:
        description = admin.describe_consumer_groups([group_id])[group_id]
        if args.execute and description.state not in INACTIVE_STATES:
            raise GroupCommandError(f"Assignments can only be reset if the group '{group_id}' is inactive, "
                                    f"but the current state is {description.state}.")
        if from_file:
            if group_id not in file_plan:
                print(f"Error: No reset plan for group {group_id} found", file=out)
            new_offsets = _clamped(admin, file_plan.get(group_id, {}))
        else:
            committed = admin.list_consumer_group_offsets(group_id)
            partitions = _reset_partitions(admin, args, committed)
            new_offsets = _new_offsets(admin, args.reset, partitions, committed, out)
        if args.execute and new_offsets:
            admin.alter_consumer_group_offsets(group_id, new_offsets)
        plan[group_id] = new_offsets
        if args.export:
            continue
        rows: list[tuple[object, ...]] = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
        rows += [(group_id, tp.topic, tp.partition, offset) for tp, offset in sorted(new_offsets.items())]
        print_table(rows, out)
        print(file=out)
    if args.export:
        print(export_reset_plan(plan, with_group=len(groups) > 1), file=out)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        raise GroupCommandError(f"Cannot read the reset plan {path}: {error.strerror}") from None


def _reset_partitions(admin: Admin, args: argparse.Namespace, committed) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    topics, partitions = parse_topic_partitions(args.topic)
    if topics:
        described = admin.describe_topics(topics)
        for topic in topics:
            partitions.extend(TopicPartition(topic, p.partition) for p in described[topic].partitions)
    return sorted(set(partitions))


def _log_offsets(admin: Admin, partitions: Iterable[TopicPartition], spec: str | int) -> dict[TopicPartition, int]:
    return {tp: r.offset for tp, r in admin.list_offsets(dict.fromkeys(partitions, spec)).items()}


def _clamped(admin: Admin, requested: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Each offset moved into [log start, log end], as Kafka's checkOffsetsRange does."""
    if not requested:
        return {}
    earliest, latest = _log_offsets(admin, requested, "earliest"), _log_offsets(admin, requested, "latest")
    return {tp: max(earliest[tp], min(latest[tp], offset)) for tp, offset in requested.items()}


def _offsets_for_time(admin: Admin, partitions: list[TopicPartition], timestamp_ms: int,
                      out: TextIO) -> dict[TopicPartition, int]:
    """The first offset at or after `timestamp_ms`; the log end offset where no record is that late."""
    found = _log_offsets(admin, partitions, timestamp_ms) if partitions else {}
    missing = [tp for tp in partitions if found[tp] < 0]
    for tp in missing:
        print(f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back to latest known offset.",
              file=out)
    if missing:
        found.update(_log_offsets(admin, missing, "latest"))
    return found


def _new_offsets(admin: Admin, reset: tuple[str, object], partitions: list[TopicPartition],
                 committed, out: TextIO) -> dict[TopicPartition, int]:
    kind, value = reset
    if kind == "to-datetime":
        return _offsets_for_time(admin, partitions, parse_datetime_ms(str(value)), out)
    if kind == "by-duration":
        now_ms = int(time.time() * 1000)
        return _offsets_for_time(admin, partitions, now_ms - parse_duration_ms(str(value)), out)
    if not partitions:
        return {}
    earliest, latest = _log_offsets(admin, partitions, "earliest"), _log_offsets(admin, partitions, "latest")

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    offsets = {}
    for tp in partitions:
        current = committed[tp].offset if tp in committed else latest[tp]
        if kind == "to-earliest":
            offsets[tp] = earliest[tp]
        elif kind == "to-latest":
            offsets[tp] = latest[tp]
        elif kind == "to-current":
            offsets[tp] = current
        elif kind == "to-offset":
            offsets[tp] = clamp(tp, int(value))  # type: ignore[call-overload]
        else:
            offsets[tp] = clamp(tp, current + int(value))  # type: ignore[call-overload]
    return offsets


# --------------------------------------------------------------------------------------------- delete

def run_delete(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    groups = _groups(admin, args)
    results = admin.delete_consumer_groups(groups, raise_errors=False)
    failed = {g: e for g, e in results.items() if e is not None}
    succeeded = [g for g in groups if g not in failed]
    if succeeded:
        names = ", ".join(f"'{g}'" for g in succeeded)
        print(f"Deletion of requested consumer groups ({names}) was successful.", file=out)
    for group_id, error in failed.items():
        print(f"Deletion of some consumer groups failed:\n* Group '{group_id}' could not be deleted due to: "
              f"{error.error_name}", file=out)
    if failed:
        raise GroupCommandError("some groups could not be deleted")


# --------------------------------------------------------------------------------------------- delete-offsets

DELETE_OFFSETS_GROUP_ERRORS = {
    "INVALID_GROUP_ID": "'{group}' is not valid.",
    "GROUP_ID_NOT_FOUND": "'{group}' does not exist.",
    "GROUP_AUTHORIZATION_FAILED": "Access to '{group}' is not authorized.",
    "NON_EMPTY_GROUP": "Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
}
PARTITION_LEVEL_ERRORS = ("GROUP_SUBSCRIBED_TO_TOPIC", "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_OR_PARTITION")
NO_PARTITION = -1  # a row for a topic whose partitions could not be listed


def run_delete_offsets(admin: Admin, args: argparse.Namespace, out: TextIO) -> int:
    """Prints whether the request succeeded, then TOPIC PARTITION STATUS per partition; 1 when any
    offset was kept."""
    if len(args.group) != 1:
        raise GroupCommandError("Option [--delete-offsets] takes exactly one [--group].")
    if not args.topic:
        raise GroupCommandError("Option [--delete-offsets] takes one or more [--topic].")
    group_id = args.group[0]
    topics, partitions = parse_topic_partitions(args.topic)
    results: dict[TopicPartition, KafkaError | None] = {}
    for topic, described in (admin.describe_topics(topics, raise_errors=False) if topics else {}).items():
        if isinstance(described, KafkaError):
            results[TopicPartition(topic, NO_PARTITION)] = described
        else:
            partitions.extend(TopicPartition(topic, p.partition) for p in described.partitions)
    group_error: KafkaError | None = None
    if partitions:
        try:
            results.update(admin.delete_consumer_group_offsets(group_id, partitions, raise_errors=False))
        except KafkaError as error:
            if error.code in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.REQUEST_TIMED_OUT):
                raise
            group_error = error
            results.update(dict.fromkeys(partitions, error))
    failed = next((e for e in results.values() if e is not None), None)
    if group_error is None and failed is None:
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} group {group_id}", file=out)
    elif group_error is not None and group_error.error_name in DELETE_OFFSETS_GROUP_ERRORS:
        print("Error: " + DELETE_OFFSETS_GROUP_ERRORS[group_error.error_name].format(group=group_id), file=out)
    elif (group_error or failed).error_name in PARTITION_LEVEL_ERRORS:  # type: ignore[union-attr]
        print("Error: Encounter some partition level error, see the follow-up details:", file=out)
    else:
        print(f"Error: Encounter some unknown error: {(group_error or failed).error_name}", file=out)  # type: ignore[union-attr]
    print(file=out)
    print(f"{'TOPIC':<30} {'PARTITION':<15} STATUS", file=out)
    for tp, error in sorted(results.items()):
        partition = tp.partition if tp.partition != NO_PARTITION else "Not Provided"
        status = "Successful" if error is None else f"Error: {error.spec.description}"
        print(f"{tp.topic:<30} {partition!s:<15} {status}", file=out)
    return 0 if failed is None else 1


COMMANDS = {"list": run_list, "describe": run_describe, "reset-offsets": run_reset_offsets, "delete": run_delete,
            "delete-offsets": run_delete_offsets}
