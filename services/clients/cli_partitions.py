"""`odradek delete-records`, `leader-election` and `get-offsets`: Kafka's kafka-delete-records.sh,
kafka-leader-election.sh and (Kafka 3.x) GetOffsetShell on the admin client.

    delete-records --offset-json-file F
        F is {"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}
        (offset -1: the high watermark); prints `partition: t-0<TAB>low_watermark: 10` per
        partition, or `partition: t-0<TAB>error: <error>`.
    leader-election --election-type preferred|unclean
                    (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)
        F is {"partitions": [{"topic": "t", "partition": 0}]}; prints the partitions elected, those
        whose leader already was the one to elect, and one line per failure (then exits with 1).
    get-offsets --topic T [--partitions 0,1] [--time -1|-2|<ms>]
        prints `topic:partition:offset` per partition, sorted; `--topic` is a regular expression
        (all topics when left out) and an offset no record reaches prints as empty.

Each takes --bootstrap-server and --command-config (a properties file of admin client configs); a
failure prints `Error: <message>` and exits with 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from services.clients.admin import Admin
from services.clients.cli_groups import run_admin_command
from services.clients.cli_topics import filter_topics
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition

MAX_TIMESTAMP_SPEC = -3


class PartitionCommandError(Exception):
    """A user error reported before anything is asked of the cluster."""


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    _add_delete_records_parser(subparsers)
    _add_leader_election_parser(subparsers)
    _add_get_offsets_parser(subparsers)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--command-config", "--admin.config", dest="command_config", metavar="FILE",
                        help="a properties file of admin client configs")
    parser.add_argument("--timeout", type=int, default=30000, help="milliseconds to wait for answers")


def _run(command):
    def run(args: argparse.Namespace, out: TextIO) -> int:
        return run_admin_command(args, out, command, PartitionCommandError)
    return run


def _format_tp(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _load_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise PartitionCommandError(f"cannot read {path}: {error}") from None


def _partition_entries(document: Any, path: str, with_offset: bool) -> list[tuple[TopicPartition, int]]:
    """The `partitions` of a Kafka tool's JSON file as (partition, offset) pairs (offset 0 without
    `with_offset`); a repeated partition is an error, as in Kafka."""
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise PartitionCommandError(f"{path} has no \"partitions\" list")
    pairs = []
    for entry in entries:
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            offset = int(entry["offset"]) if with_offset else 0
        except (KeyError, TypeError, ValueError):
            wanted = '"topic", "partition" and "offset"' if with_offset else '"topic" and "partition"'
            raise PartitionCommandError(f"each entry of {path} needs {wanted}: {entry!r}") from None
        pairs.append((tp, offset))
    seen: set[TopicPartition] = set()
    duplicates = sorted({tp for tp, _ in pairs if tp in seen or seen.add(tp)})
    if duplicates:
        raise PartitionCommandError(f"{path} contains duplicate topic partitions: "
                                    + ",".join(_format_tp(tp) for tp in duplicates))
    return pairs


# --------------------------------------------------------------------------------------------- delete-records

def _add_delete_records_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("delete-records", help="delete records before given offsets",
                                   description="Delete the records of partitions before the offsets of a "
                                               "JSON file.")
    _add_common(parser)
    parser.add_argument("--offset-json-file", required=True, metavar="FILE",
                        help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}')
    parser.set_defaults(run=_run(run_delete_records))


def parse_offset_json(document: Any, path: str = "the offset JSON file") -> dict[TopicPartition, int]:
    return dict(_partition_entries(document, path, with_offset=True))


def format_delete_records(results: Mapping[TopicPartition, int | KafkaError]) -> list[str]:
    lines = ["Records delete operation completed:"]
    for tp, result in results.items():
        outcome = f"error: {result}" if isinstance(result, KafkaError) else f"low_watermark: {result}"
        lines.append(f"partition: {_format_tp(tp)}\t{outcome}")
    return lines


def run_delete_records(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    offsets = parse_offset_json(_load_json(args.offset_json_file), args.offset_json_file)
    print("Executing records delete operation", file=out)
    results = admin.delete_records(offsets, raise_errors=False)
    for line in format_delete_records(results):
        print(line, file=out)


# --------------------------------------------------------------------------------------------- leader-election

def _add_leader_election_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("leader-election", help="elect preferred or unclean partition leaders",
                                   description="Ask the controller for a preferred or unclean leader election.")
    _add_common(parser)
    parser.add_argument("--election-type", required=True, type=str.upper, choices=["PREFERRED", "UNCLEAN"],
                        help="preferred or unclean")
    parser.add_argument("--topic", help="the topic of --partition")
    parser.add_argument("--partition", type=int, help="the partition of --topic")
    parser.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    parser.add_argument("--path-to-json-file", metavar="FILE",
                        help='{"partitions": [{"topic": "t", "partition": 0}]}')
    parser.set_defaults(run=_run(run_leader_election), check=lambda args: check_election_args(parser, args))


def check_election_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    chosen = [args.topic is not None or args.partition is not None, args.all_topic_partitions,
              args.path_to_json_file is not None]
    if sum(chosen) != 1:
        parser.error("exactly one of --topic/--partition, --all-topic-partitions or --path-to-json-file "
                     "is required")
    if chosen[0] and (args.topic is None or args.partition is None):
        parser.error("--topic and --partition go together")


def election_partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    if args.all_topic_partitions:
        return None
    if args.path_to_json_file is not None:
        document = _load_json(args.path_to_json_file)
        return [tp for tp, _ in _partition_entries(document, args.path_to_json_file, with_offset=False)]
    return [TopicPartition(args.topic, args.partition)]


def format_election(election_type: str, results: Mapping[TopicPartition, KafkaError | None]) -> tuple[list[str], int]:
    """Kafka's lines for an election's results, and how many partitions failed."""
    ordered = sorted(results.items())
    elected = [tp for tp, error in ordered if error is None]
    not_needed = [tp for tp, error in ordered if error is not None and error.code == Errors.ELECTION_NOT_NEEDED]
    failed = [(tp, error) for tp, error in ordered if error is not None and error.code != Errors.ELECTION_NOT_NEEDED]
    lines = []
    if elected:
        lines.append(f"Successfully completed leader election ({election_type}) for partitions "
                     + ", ".join(map(_format_tp, elected)))
    if not_needed:
        lines.append("Valid replica already elected for partitions " + ", ".join(map(_format_tp, not_needed)))
    for tp, error in failed:
        lines.append(f"Error completing leader election ({election_type}) for partition: {_format_tp(tp)}: {error}")
    return lines, len(failed)


def run_leader_election(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    results = admin.elect_leaders(args.election_type.lower(), election_partitions(args))
    lines, failures = format_election(args.election_type, results)
    for line in lines:
        print(line, file=out)
    if failures:
        raise PartitionCommandError(f"{failures} replica(s) could not be elected")


# --------------------------------------------------------------------------------------------- get-offsets

def _add_get_offsets_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("get-offsets", help="print partitions' offsets for a time",
                                   description="Print topic:partition:offset for the earliest (-2) or latest "
                                               "(-1) offset, or the first offset at or after a timestamp in ms.")
    _add_common(parser)
    parser.add_argument("--topic", help="a regular expression of topic names (default: every topic)")
    parser.add_argument("--partitions", metavar="P,P", help="comma-separated partition ids (default: all)")
    parser.add_argument("--time", default="-1", help="-1 (latest, the default), -2 (earliest) or a timestamp in ms")
    parser.add_argument("--exclude-internal-topics", action="store_true", help="leave internal topics out")
    parser.set_defaults(run=_run(run_get_offsets))


def parse_partition_ids(text: str | None) -> set[int] | None:
    if text is None or not text.strip():
        return None
    try:
        return {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise PartitionCommandError(f"--partitions must be comma-separated partition ids, not {text!r}") from None


def parse_time(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise PartitionCommandError(f"--time must be -1, -2 or a timestamp in ms, not {text!r}") from None
    if value == MAX_TIMESTAMP_SPEC:
        raise PartitionCommandError("--time -3 (the offset of the largest timestamp) is not served by Odradek "
                                    "brokers; use -1, -2 or a timestamp in ms")
    if value < -2:
        raise PartitionCommandError(f"--time must be -1, -2 or a timestamp in ms, not {text!r}")
    return value


def format_offsets(offsets: Mapping[TopicPartition, int]) -> list[str]:
    """`topic:partition:offset` sorted by topic and partition; an offset < 0 (none found) prints empty."""
    return [f"{tp.topic}:{tp.partition}:{offset if offset >= 0 else ''}" for tp, offset in sorted(offsets.items())]


def run_get_offsets(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    time = parse_time(args.time)
    ids = parse_partition_ids(args.partitions)
    names = filter_topics(admin.list_topics(include_internal=not args.exclude_internal_topics), args.topic)
    descriptions = admin.describe_topics(names, raise_errors=False)
    wanted = [TopicPartition(name, p.partition) for name, description in descriptions.items()
              if not isinstance(description, KafkaError)
              for p in description.partitions if ids is None or p.partition in ids]
    if not wanted:
        raise PartitionCommandError("no partitions match the given topic and partitions")
    results = admin.list_offsets(dict.fromkeys(wanted, time), raise_errors=False)
    offsets = {}
    for tp, result in results.items():
        if isinstance(result, KafkaError):
            print(f"Skipping {_format_tp(tp)}: {result}", file=sys.stderr)
        else:
            offsets[tp] = result.offset
    for line in format_offsets(offsets):
        print(line, file=out)

