"""`odradek dump-log`: Kafka's kafka-dump-log.sh (DumpLogSegments) over a partition's segment files,
read directly from disk.

    dump-log --files a.log,b.index,c.timeindex [--deep-iteration] [--print-data-log]
             [--index-sanity-check]

Each file is introduced by `Dumping <file>`. A `.log` file prints `Log starting offset: N` (from
its name) and one line per batch

    baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1
    producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0
    CreateTime: 1700000000000 size: 90 magic: 2 compresscodec: none crc: 1234 isvalid: true

(on one line); --deep-iteration adds `| offset: 0 CreateTime: .. keySize: -1 valueSize: 3
sequence: -1 headerKeys: []` per record, and --print-data-log (which implies it) the record's
`key: ..` (when it has one) and `payload: ..`; a transaction marker shows `endTxnMarker: COMMIT
coordinatorEpoch: N`. A `.index` file prints `offset: N position: M` per entry, a `.timeindex`
file `timestamp: T offset: N`; with --index-sanity-check an index is only checked.

Batches are read by the one record codec (`services.common.records`). The index files' layouts
(8-byte offset entries, 12-byte time entries, big-endian, after the segment's base offset in the
file name) are owned by the broker's log, which a client tool may not import: the two entry
readers here are the few lines needed to read them. Preallocated, never written slots (zeros)
end an index's entries, as they do for Kafka's tool.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from services.common.errors import KafkaError
from services.common.records import (
    BatchHeader,
    Compression,
    decode_batch,
    iter_batch_positions,
    parse_control_record,
    parse_header,
)
from services.common.records.batch import LOG_APPEND_TIME, NO_SEQUENCE

OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position in the .log file
TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


class DumpLogError(Exception):
    """A file the tool cannot read."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("dump-log", help="print the contents of segment and index files",
                                   description="Print the batches and records of .log files and the entries of "
                                               ".index and .timeindex files.")
    parser.add_argument("--files", required=True, metavar="F,F", help="comma-separated files to dump")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    parser.add_argument("--print-data-log", action="store_true", help="print record keys and values")
    parser.add_argument("--index-sanity-check", action="store_true", help="only check each index file")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, out: TextIO) -> int:
    code = 0
    for name in (f.strip() for f in args.files.split(",") if f.strip()):
        print(f"Dumping {name}", file=out)
        try:
            lines = dump_file(Path(name), deep=args.deep_iteration or args.print_data_log,
                              print_data=args.print_data_log, sanity_only=args.index_sanity_check)
            for line in lines:
                print(line, file=out)
        except (OSError, DumpLogError) as error:
            print(f"Error: {error}", file=sys.stderr)
            code = 1
    return code


def base_offset_of(path: Path) -> int:
    """The segment's base offset: its file name without the extension."""
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        raise DumpLogError(f"{path} is not named by a base offset (00000000000000000000.log)") from None


def dump_file(path: Path, *, deep: bool = False, print_data: bool = False,
              sanity_only: bool = False) -> Iterator[str]:
    suffix = path.suffix
    if suffix == ".log":
        return dump_log(path, deep, print_data)
    if suffix in (".index", ".timeindex"):
        entry = OFFSET_ENTRY if suffix == ".index" else TIME_ENTRY
        if sanity_only:
            return iter([sanity_check(path, entry)])
        return dump_offset_index(path) if suffix == ".index" else dump_time_index(path)
    raise DumpLogError(f"{path}: only .log, .index and .timeindex files can be dumped")


# --------------------------------------------------------------------------------------------- log

def dump_log(path: Path, deep: bool, print_data: bool) -> Iterator[str]:
    data = path.read_bytes()
    yield f"Log starting offset: {base_offset_of(path)}"
    end = 0
    for position, size in iter_batch_positions(data):
        end = position + size
        valid = True
        try:
            header, records = decode_batch(data, position)
        except KafkaError:  # a corrupt batch: its header still says where the next one starts
            header, records, valid = parse_header(data, position), [], False
        yield format_batch(header, position, valid)
        if deep:
            for index, record in enumerate(records):
                yield format_record(header, index, record, print_data)
    if end < len(data):
        yield f"Found {len(data) - end} invalid bytes at the end of {path.name}"


def format_batch(header: BatchHeader, position: int, valid: bool) -> str:
    last_sequence = header.last_sequence
    return (f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {last_sequence} producerId: {header.producer_id} "
            f"producerEpoch: {header.producer_epoch} partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
            f"position: {position} {TIMESTAMP_TYPES[header.timestamp_type]}: {header.max_timestamp} "
            f"size: {header.size_in_bytes} magic: {header.magic} "
            f"compresscodec: {Compression(header.compression).name.lower()} crc: {header.crc} "
            f"isvalid: {_bool(valid)}")


def format_record(header: BatchHeader, index: int, record, print_data: bool) -> str:
    sequence = NO_SEQUENCE if header.base_sequence == NO_SEQUENCE else \
        (header.base_sequence + record.offset - header.base_offset) & 0x7FFFFFFF
    timestamp_type = "LogAppendTime" if header.timestamp_type == LOG_APPEND_TIME else "CreateTime"
    line = (f"| offset: {record.offset} {timestamp_type}: {record.timestamp} keySize: {_size(record.key)} "
            f"valueSize: {_size(record.value)} sequence: {sequence} "
            f"headerKeys: [{','.join(key for key, _ in record.headers)}]")
    if header.is_control:
        marker = parse_control_record(record.key, record.value)
        return f"{line} endTxnMarker: {'COMMIT' if marker.commit else 'ABORT'} " \
               f"coordinatorEpoch: {marker.coordinator_epoch}"
    if print_data:
        if record.key is not None:
            line += f" key: {_text(record.key)}"
        line += f" payload: {_text(record.value)}"
    return line


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


# --------------------------------------------------------------------------------------------- indexes

def _entries(path: Path, entry: struct.Struct) -> list[tuple[int, int]]:
    """The written entries: up to the first all-zero slot after the first entry (preallocated space)."""
    data = path.read_bytes()
    entries = []
    for i in range(len(data) // entry.size):
        fields = entry.unpack_from(data, i * entry.size)
        if i > 0 and not any(fields):
            break
        entries.append(fields)
    return entries


def dump_offset_index(path: Path) -> Iterator[str]:
    base = base_offset_of(path)
    for relative, position in _entries(path, OFFSET_ENTRY):
        yield f"offset: {base + relative} position: {position}"


def dump_time_index(path: Path) -> Iterator[str]:
    base = base_offset_of(path)
    for timestamp, relative in _entries(path, TIME_ENTRY):
        yield f"timestamp: {timestamp} offset: {base + relative}"


def sanity_check(path: Path, entry: struct.Struct) -> str:
    """Kafka's index sanity check: a whole number of entries, offsets (and timestamps) never decreasing."""
    size = path.stat().st_size
    if size % entry.size:
        raise DumpLogError(f"{path} failed sanity check: its size {size} is not a multiple of {entry.size}")
    entries = _entries(path, entry)
    key = 0 if entry is OFFSET_ENTRY else 1
    offsets = [fields[key] for fields in entries]
    if any(b < a for a, b in zip(offsets, offsets[1:], strict=False)) or any(o < 0 for o in offsets):
        raise DumpLogError(f"{path} failed sanity check: its offsets are not in order")
    if entry is TIME_ENTRY:
        stamps = [fields[0] for fields in entries]
        if any(b < a for a, b in zip(stamps, stamps[1:], strict=False)):
            raise DumpLogError(f"{path} failed sanity check: its timestamps are not in order")
    return f"{path} passed sanity check."
