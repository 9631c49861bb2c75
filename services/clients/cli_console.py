"""`odradek console-producer` and `odradek console-consumer`: Kafka's console tools on the Producer and
Consumer.

    odradek console-producer --bootstrap-server B --topic T [--property parse.key=true]
        [--property key.separator=:] [--producer-property k=v ...] [--producer.config FILE]
        [--request-required-acks all] [--compression-codec lz4] [--sync]
    odradek console-consumer --bootstrap-server B (--topic T | --include REGEX) [--group G]
        [--from-beginning] [--max-messages N] [--timeout-ms MS] [--partition P [--offset earliest|latest|N]]
        [--consumer-property k=v ...] [--consumer.config FILE] [--property print.key=true ...]
        [--skip-message-on-error]

The producer sends each stdin line as one record; with `parse.key=true` the text before the first
`key.separator` (default a tab) is the key, and a line without it is an error unless `ignore.error=true`
(then the whole line is the value).

The consumer prints each record's value (and, on request, its timestamp, partition, offset, headers
and key), then `Processed a total of N messages` on stderr. It is a member of consumer group G (the
same group named by --group, `group.id` of --consumer.config or of --consumer-property), or of a
random group `console-consumer-NNNNN` that commits nothing unless enable.auto.commit says so. It
subscribes to the topic, or to every topic the --include pattern fully matches, and starts where the
group committed; without a committed offset at the latest offset, or the earliest with
--from-beginning (auto.offset.reset). With --partition it assigns that one partition and starts at
--offset (default latest; earliest with --from-beginning); the group then only commits. Offsets are
committed by auto-commit and on exit; when --max-messages stops it inside a fetched batch, the
partitions are first moved back to the records not printed, so the group's next member prints them.
A fetched batch that is corrupt (CORRUPT_MESSAGE: its CRC or its records' framing) stops the consumer
with an error naming topic, partition and offset; with --skip-message-on-error it prints that on
stderr, seeks to the next offset and goes on.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TextIO

from services.common.config import ConfigError, load_properties
from services.common.errors import KafkaError
from services.common.records.batch import CorruptRecordError
from services.common.topic_partition import TopicPartition

TRUE_TEXTS = ("true", "yes", "1")


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    _add_producer_parser(subparsers)
    _add_consumer_parser(subparsers)


def parse_key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """["k=v", ...] -> {k: v}; a missing '=' is a usage error naming `flag`."""
    parsed = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"{flag} expects KEY=VALUE, not {item!r}")
        parsed[key.strip()] = value
    return parsed


def client_settings(args: argparse.Namespace, config_file: str | None, properties: Iterable[str],
                    flag: str) -> dict[str, str]:
    """The client's configs: the properties file, then repeated KEY=VALUE flags, then bootstrap."""
    settings: dict[str, str] = {}
    if config_file:
        settings.update(load_properties(config_file))
    settings.update(parse_key_values(properties, flag))
    if getattr(args, "bootstrap_server", None):
        settings["bootstrap.servers"] = args.bootstrap_server
    return settings


def _is_true(properties: Mapping[str, str], key: str, default: bool = False) -> bool:
    value = properties.get(key)
    return default if value is None else value.strip().lower() in TRUE_TEXTS


def unescape(text: str) -> str:
    """Kafka's separators may be written as \\t or \\n on the command line."""
    return text.encode("utf-8").decode("unicode_escape")


# --------------------------------------------------------------------------------------------- producer

def _add_producer_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("console-producer", help="send stdin lines with the Producer",
                                   description="Read lines from stdin and send each as one record.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="parse.key, key.separator, ignore.error, null.marker (repeatable)")
    parser.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                        help="a producer config (repeatable)")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                        help="a properties file of producer configs")
    parser.add_argument("--request-required-acks", default=None, help="acks: 0, 1, -1 or all (default all)")
    parser.add_argument("--compression-codec", nargs="?", const="gzip", default=None,
                        choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement")
    parser.add_argument("--batch-size", type=int, default=None, help="batch.size in bytes")
    parser.add_argument("--timeout", type=int, default=None, metavar="MS", help="linger.ms")
    parser.set_defaults(run=run_console_producer)


class LineReader:
    """Turns console lines into (key, value) pairs as Kafka's LineMessageReader does."""

    def __init__(self, properties: Mapping[str, str]):
        self.parse_key = _is_true(properties, "parse.key")
        self.key_separator = unescape(properties.get("key.separator", "\t")).encode()
        self.ignore_error = _is_true(properties, "ignore.error")
        marker = properties.get("null.marker")
        self.null_marker = marker.encode() if marker else None
        self.line_number = 0

    def _nullable(self, data: bytes) -> bytes | None:
        return None if self.null_marker is not None and data == self.null_marker else data

    def parse(self, line: bytes) -> tuple[bytes | None, bytes | None]:
        self.line_number += 1
        if not self.parse_key:
            return None, self._nullable(line)
        key, sep, value = line.partition(self.key_separator)
        if not sep:
            if self.ignore_error:
                return None, self._nullable(line)
            text = line.decode("utf-8", errors="backslashreplace")
            raise ValueError(f"No key separator found on line number {self.line_number}: '{text}'")
        return self._nullable(key), self._nullable(value)


def producer_settings(args: argparse.Namespace) -> dict[str, str]:
    settings = {"linger.ms": "1000"} if args.timeout is None else {"linger.ms": str(args.timeout)}
    settings.update(client_settings(args, args.producer_config, args.producer_property, "--producer-property"))
    if args.request_required_acks is not None:
        settings["acks"] = args.request_required_acks
    if args.compression_codec is not None:
        settings["compression.type"] = args.compression_codec
    if args.batch_size is not None:
        settings["batch.size"] = str(args.batch_size)
    if sys.stdin.isatty() and args.timeout is None:
        settings["linger.ms"] = "0"
    return settings


def run_console_producer(args: argparse.Namespace, out: TextIO) -> int:
    from services.clients.producer import Producer

    try:
        reader = LineReader(parse_key_values(args.property, "--property"))
        producer = Producer(producer_settings(args))
    except (argparse.ArgumentTypeError, ConfigError, KafkaError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    failures: list[BaseException] = []

    def on_done(metadata, exception) -> None:
        if exception is not None and not failures:
            failures.append(exception)
            print(f"Error when sending message to topic {args.topic}: {exception}", file=sys.stderr)

    try:
        for raw in sys.stdin.buffer:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            line = line[:-1] if line.endswith(b"\r") else line
            key, value = reader.parse(line)
            future = producer.send(args.topic, value, key=key, callback=on_done)
            if args.sync:
                future.get()
            if failures:
                break
        producer.flush()
    except (ValueError, KafkaError) as error:
        if not failures:
            print(f"Error: {error}", file=sys.stderr)
        return 1
    finally:
        producer.close()
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------- consumer

def _add_consumer_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("console-consumer", help="print records with the Consumer",
                                   description="Print the records of a topic, or of the topics a regular "
                                               "expression matches, as a member of a consumer group.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--topic", help="the topic to read (exactly one of --topic and --include)")
    parser.add_argument("--include", metavar="REGEX", help="read every topic this regular expression fully matches")
    parser.add_argument("--whitelist", metavar="REGEX", help=argparse.SUPPRESS)
    parser.add_argument("--group", help="consumer group id (default console-consumer-<5 random digits>)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="without a committed offset, start at the earliest offset rather than the latest")
    parser.add_argument("--partition", type=int, help="read only this partition, assigned without a group rebalance")
    parser.add_argument("--offset", default=None,
                        help="earliest, latest or an offset (needs --partition; default latest)")
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument("--timeout-ms", type=int, help="exit when no record came for this long")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="print.key, print.timestamp, print.offset, print.partition, print.headers, "
                             "print.value, key.separator, line.separator, null.literal (repeatable)")
    parser.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                        help="a consumer config (repeatable)")
    parser.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                        help="a properties file of consumer configs")
    parser.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                        default="read_uncommitted")
    parser.add_argument("--skip-message-on-error", action="store_true",
                        help="skip a corrupt record (printing its partition and offset on stderr) instead of "
                             "stopping")
    parser.set_defaults(run=run_console_consumer, check=check_console_consumer)


def included_topics(args: argparse.Namespace) -> str | None:
    """The --include regular expression (--whitelist, its deprecated name, when --include is absent)."""
    return args.include if args.include is not None else args.whitelist


def check_console_consumer(args: argparse.Namespace) -> None:
    if (args.topic is None) == (included_topics(args) is None):
        deprecated = " --whitelist is deprecated: use --include." if args.whitelist is not None else ""
        sys.exit(f"Exactly one of --include/--topic is required.{deprecated}")
    if args.partition is not None and args.topic is None:
        sys.exit("The topic is required when partition is specified.")
    if args.offset is not None and args.partition is None:
        sys.exit("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        sys.exit("Options from-beginning and offset cannot be specified together.")
    if args.offset is not None:
        text = args.offset.strip().lower()
        if text not in ("earliest", "latest") and not text.isdigit():
            sys.exit(f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                     "'earliest', 'latest', or a non-negative long.")


class RecordFormatter:
    """Kafka's DefaultMessageFormatter: optional fields, each followed by a separator, then the value."""

    def __init__(self, properties: Mapping[str, str]):
        self.print_timestamp = _is_true(properties, "print.timestamp")
        self.print_partition = _is_true(properties, "print.partition")
        self.print_offset = _is_true(properties, "print.offset")
        self.print_headers = _is_true(properties, "print.headers")
        self.print_key = _is_true(properties, "print.key")
        self.print_value = _is_true(properties, "print.value", default=True)
        self.key_separator = unescape(properties.get("key.separator", "\t"))
        self.line_separator = unescape(properties.get("line.separator", "\n"))
        self.null_literal = properties.get("null.literal", "null")

    def _text(self, data: bytes | None) -> str:
        return self.null_literal if data is None else data.decode("utf-8", errors="backslashreplace")

    def format(self, record) -> str:
        parts = []
        if self.print_timestamp:
            kind = "CreateTime" if record.timestamp_type == 0 else "LogAppendTime"
            parts.append(f"{kind}:{record.timestamp}")
        if self.print_partition:
            parts.append(f"Partition:{record.partition}")
        if self.print_offset:
            parts.append(f"Offset:{record.offset}")
        if self.print_headers:
            headers = ",".join(f"{k}:{self._text(v)}" for k, v in record.headers) or "NO_HEADERS"
            parts.append(headers)
        if self.print_key:
            parts.append(self._text(record.key))
        fields = [self.key_separator.join(parts)] if parts else []
        if self.print_value:
            fields.append(self._text(record.value))
        return self.key_separator.join(fields) + self.line_separator


def random_group_id(prefix: str) -> str:
    """`prefix` and five random digits: the group of a tool run that was given none."""
    return f"{prefix}{random.randrange(10000, 100000)}"


def console_group_id(args: argparse.Namespace, from_file: Mapping[str, str],
                     from_properties: Mapping[str, str]) -> str | None:
    """The group named by --group, --consumer.config or --consumer-property (they must agree), or None."""
    named = [group for group in (args.group, from_file.get("group.id"), from_properties.get("group.id")) if group]
    if len(set(named)) > 1:
        detected = "', '".join(dict.fromkeys(named))
        raise ValueError("The group ids provided in different places (directly using '--group', via "
                         "'--consumer-property', or via '--consumer.config') do not match. "
                         f"Detected group ids: '{detected}'")
    return named[0] if named else None


def consumer_settings(args: argparse.Namespace) -> dict[str, str]:
    """The console consumer's configs, as Kafka's tool builds them: the file, then --consumer-property,
    auto.offset.reset from --from-beginning unless set, and a group: the one named, or a random one
    that commits nothing unless enable.auto.commit is set."""
    from_file = load_properties(args.consumer_config) if args.consumer_config else {}
    from_properties = parse_key_values(args.consumer_property, "--consumer-property")
    settings = client_settings(args, args.consumer_config, args.consumer_property, "--consumer-property")
    settings["isolation.level"] = args.isolation_level
    reset = settings.get("auto.offset.reset")
    if reset is not None and args.from_beginning and reset.strip().lower() != "earliest":
        raise ValueError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
                         "please remove one option")
    settings.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    settings.setdefault("client.id", "console-consumer")
    group = console_group_id(args, from_file, from_properties)
    if group is None:
        settings["group.id"] = random_group_id("console-consumer-")
        settings.setdefault("enable.auto.commit", "false")  # a random group is never read again
    else:
        settings["group.id"] = group
    return settings


def starting_point(args: argparse.Namespace) -> str | int:
    if args.offset is not None:
        text = args.offset.strip().lower()
        return int(text) if text.isdigit() else text
    return "earliest" if args.from_beginning else "latest"


def start_reading(consumer, args: argparse.Namespace) -> None:
    """Subscribes to --topic or --include in the group; with --partition assigns it and seeks instead."""
    if args.partition is None:
        pattern = included_topics(args)
        if pattern is None:
            consumer.subscribe([args.topic])
        else:
            consumer.subscribe(pattern=pattern)
        return
    partition = TopicPartition(args.topic, args.partition)
    consumer.assign([partition])
    start = starting_point(args)
    if start == "earliest":
        consumer.seek_to_beginning(partition)
    elif start == "latest":
        consumer.seek_to_end(partition)
    else:
        consumer.seek(partition, start)


def run_console_consumer(args: argparse.Namespace, out: TextIO) -> int:
    from services.clients.consumer import Consumer

    try:
        formatter = RecordFormatter(parse_key_values(args.property, "--property"))
        consumer = Consumer(consumer_settings(args))
    except (argparse.ArgumentTypeError, ConfigError, KafkaError, ValueError, OSError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    progress = PrintProgress()
    try:
        start_reading(consumer, args)
        print_records(consumer, formatter, args, out, progress)
    except (KafkaError, ValueError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    finally:
        consumer.close()  # commits what was printed when the group commits
        print(f"Processed a total of {progress.processed} messages", file=sys.stderr)
    return 0


@dataclass
class PrintProgress:
    """How many records `print_records` has printed so far, still known when it stops on an error."""

    processed: int = 0


def print_records(consumer, formatter: RecordFormatter, args: argparse.Namespace, out: TextIO,
                  progress: PrintProgress | None = None) -> int:
    """Prints records until --max-messages were printed or none came for --timeout-ms; returns the count
    (also kept in `progress` as it goes)."""
    import time

    progress = PrintProgress() if progress is None else progress
    idle_since = time.monotonic()
    while args.max_messages is None or progress.processed < args.max_messages:
        try:
            records = consumer.poll(timeout_ms=200 if args.timeout_ms is None else min(200, args.timeout_ms))
        except CorruptRecordError as error:
            if not args.skip_message_on_error:
                raise
            print(f"Skipping corrupt record at offset {error.offset} of partition {error.tp}: {error}",
                  file=sys.stderr)
            consumer.seek(error.tp, error.offset + 1)
            continue
        if not records:
            if args.timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms:
                break
            continue
        idle_since = time.monotonic()
        remaining = iter(records)
        for record in remaining:
            out.write(formatter.format(record))
            progress.processed += 1
            if args.max_messages is not None and progress.processed >= args.max_messages:
                rewind_unprinted(consumer, remaining)
                break
        out.flush()
    return progress.processed


def rewind_unprinted(consumer, unprinted: Iterable) -> None:
    """Seeks each partition back to its first record left unprinted, so that closing commits only
    what was printed (as Kafka's tool does when --max-messages stops it inside a batch)."""
    first_offsets: dict[TopicPartition, int] = {}
    for record in unprinted:
        first_offsets.setdefault(TopicPartition(record.topic, record.partition), record.offset)
    for partition, offset in first_offsets.items():
        consumer.seek(partition, offset)
