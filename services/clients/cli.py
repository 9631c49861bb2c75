"""The `odradek` command line: `topics`, `consumer-groups` (see `cli_groups`), `transactions`
(see `cli_transactions`), `delete-records`, `leader-election`, `get-offsets` (see `cli_partitions`),
`configs` (see `cli_configs`), `acls` (see `cli_acls`), `dump-log` (see `cli_dump_log`), `log-dirs`
(see `cli_log_dirs`), `reassign-partitions` (see `cli_reassign`),
`dev up|down|status|start|stop|restart|kill` (see `services.devcluster.cli`), `console-producer`,
`console-consumer`, `producer-perf-test`, `consumer-perf-test` (see `cli_console` and `cli_perf`),
`jobs run` (Spark jobs, see `cli_jobs`),
and the simple `produce` / `fetch` tools built on the low-level client.

    odradek produce --bootstrap-server B --topic T [--partition P] [--key K] [--acks 1]
        sends stdin lines as record values, up to 500 lines per batch (one line per batch when
        stdin is a terminal). Without --partition a keyed record goes where Kafka's default
        partitioner puts it, and unkeyed batches go round-robin over the partitions.
    odradek fetch --bootstrap-server B --topic T --partition P [--offset earliest|latest|N]
                  [--max-messages N]
        prints `offset<TAB>key<TAB>value` from the offset until the high watermark (or N records).

`main(argv)` returns the exit code; `python -m services.clients.cli` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import BinaryIO, TextIO

from services.clients import (
    cli_acls,
    cli_configs,
    cli_console,
    cli_dump_log,
    cli_groups,
    cli_jobs,
    cli_log_dirs,
    cli_partitions,
    cli_perf,
    cli_reassign,
    cli_topics,
    cli_transactions,
)
from services.clients.lowlevel import LowLevelClient
from services.common.config import load_properties
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.hashing import partition_for_key
from services.common.records import build_batch, iter_batches
from services.common.shared_types import IsolationLevel
from services.devcluster import cli as devcluster_cli

PRODUCE_BATCH_LINES = 500
ACKS = {"0": 0, "1": 1, "-1": -1, "all": -1}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="Odradek command line tools.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cli_topics.add_parser(subparsers)
    cli_groups.add_parser(subparsers)
    cli_transactions.add_parser(subparsers)
    cli_partitions.add_parsers(subparsers)
    cli_reassign.add_parser(subparsers)
    cli_configs.add_parser(subparsers)
    cli_acls.add_parser(subparsers)
    cli_dump_log.add_parser(subparsers)
    cli_log_dirs.add_parser(subparsers)
    devcluster_cli.add_parser(subparsers)
    _add_produce_parser(subparsers)
    _add_fetch_parser(subparsers)
    cli_console.add_parsers(subparsers)
    cli_perf.add_parsers(subparsers)
    cli_jobs.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check = getattr(args, "check", None)
    if check is not None:
        check(args)
    with _sigterm_interrupts():
        try:
            return args.run(args, sys.stdout)
        except KeyboardInterrupt:
            return 130


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops a tool as Ctrl-C does, so it closes its clients (a consumer leaves its group,
    a producer flushes) instead of dying on the spot, as Kafka's tools do in their shutdown hooks."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum, _frame) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _command_config(args: argparse.Namespace) -> dict[str, str]:
    return load_properties(args.command_config) if args.command_config else {}


# --------------------------------------------------------------------------------------------- produce

def _add_produce_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("produce", help="send stdin lines as records",
                                   description="Send each stdin line as one record value.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a properties file of client configs (security.protocol, ssl.*, sasl.*)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int,
                        help="partition to write (default: by key, else round-robin)")
    parser.add_argument("--key", help="key of every record")
    parser.add_argument("--acks", choices=sorted(ACKS), default="1", help="0, 1 or all/-1 (default 1)")
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--batch-lines", type=int, default=PRODUCE_BATCH_LINES, help=argparse.SUPPRESS)
    parser.set_defaults(run=run_produce)


def read_batches(stream: BinaryIO, lines_per_batch: int) -> Iterator[list[bytes]]:
    """Lines of `stream` without their line ending, in lists of at most `lines_per_batch`."""
    lines = (line.rstrip(b"\r\n") if line.endswith(b"\n") else line for line in stream)
    while batch := list(itertools.islice(lines, lines_per_batch)):
        yield batch


def choose_partitions(partition: int | None, key: bytes | None, count: int) -> Iterator[int]:
    """The partition of each successive batch: fixed, by key (murmur2), or round-robin."""
    if partition is not None:
        return itertools.repeat(partition)
    if key is not None:
        return itertools.repeat(partition_for_key(key, count))
    return itertools.cycle(range(count))


def run_produce(args: argparse.Namespace, out: TextIO) -> int:
    key = args.key.encode() if args.key is not None else None
    batch_lines = 1 if sys.stdin.isatty() else max(1, args.batch_lines)
    with LowLevelClient(_command_config(args), bootstrap_servers=args.bootstrap_server) as client:
        try:
            count = len(client.partitions_for(args.topic)) if args.partition is None else 1
        except KafkaError as error:
            print(f"Error: {error}", file=sys.stderr)
            return 1
        if count == 0:
            print(f"Error: topic {args.topic!r} not found", file=sys.stderr)
            return 1
        partitions = choose_partitions(args.partition, key, count)
        for values in read_batches(sys.stdin.buffer, batch_lines):
            partition = next(partitions)
            keys = [key] * len(values) if key is not None else None
            batch = build_batch(values, keys, compression=args.compression)
            result = client.produce(args.topic, partition, batch, acks=ACKS[args.acks])
            if result.error_code != Errors.NONE:
                name = error_for_code(result.error_code).name
                print(f"Error producing to {args.topic}-{partition}: {name} ({result.error_code}) "
                      f"{result.error_message}".rstrip(), file=sys.stderr)
                return 1
    return 0


# --------------------------------------------------------------------------------------------- fetch

def _add_fetch_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("fetch", help="print records of one partition",
                                   description="Print offset, key and value of each record up to the end "
                                               "of the partition.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a properties file of client configs (security.protocol, ssl.*, sasl.*)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, required=True)
    parser.add_argument("--offset", default="earliest", help="earliest (default), latest, or an offset")
    parser.add_argument("--max-messages", type=int, help="stop after this many records")
    parser.add_argument("--max-wait-ms", type=int, default=500)
    parser.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                        default="read_uncommitted")
    parser.set_defaults(run=run_fetch)


def format_record(offset: int, key: bytes | None, value: bytes | None) -> str:
    def text(data: bytes | None) -> str:
        return "null" if data is None else data.decode("utf-8", errors="backslashreplace")

    return f"{offset}\t{text(key)}\t{text(value)}"


def run_fetch(args: argparse.Namespace, out: TextIO) -> int:
    isolation = IsolationLevel.from_config(args.isolation_level)
    with LowLevelClient(_command_config(args), bootstrap_servers=args.bootstrap_server) as client:
        spec = args.offset.strip().lower()
        if spec in ("earliest", "latest"):
            found = client.list_offset(args.topic, args.partition, spec, isolation_level=isolation)
            if found.error_code != Errors.NONE:
                return _fetch_error(args, found.error_code)
            offset = found.offset
        elif spec.isdigit():
            offset = int(spec)
        else:
            print(f"Error: --offset must be earliest, latest or a non-negative number, not {args.offset!r}",
                  file=sys.stderr)
            return 1
        for line in fetch_lines(client, args, offset, isolation):
            if isinstance(line, int):
                return _fetch_error(args, line)
            print(line, file=out)
    return 0


def fetch_lines(client: LowLevelClient, args: argparse.Namespace, offset: int,
                isolation: int) -> Iterable[str | int]:
    """Formatted records from `offset` to the high watermark; an int is an error code (and the end)."""
    remaining = args.max_messages
    while remaining is None or remaining > 0:
        result = client.fetch(args.topic, args.partition, offset, max_wait_ms=args.max_wait_ms,
                              isolation_level=isolation)
        if result.error_code != Errors.NONE:
            yield result.error_code
            return
        start = offset
        for header, records in iter_batches(result.records):
            for record in records if not header.is_control else ():
                if record.offset < offset:
                    continue
                yield format_record(record.offset, record.key, record.value)
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            offset = max(offset, header.next_offset)
        if offset == start or offset >= result.high_watermark:
            return


def _fetch_error(args: argparse.Namespace, code: int) -> int:
    name = error_for_code(code).name
    print(f"Error fetching {args.topic}-{args.partition}: {name} ({code})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
