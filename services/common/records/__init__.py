"""Kafka's RecordBatch v2 format: headers, encoding, and the one reader of records.

`batch` owns the 61-byte header, `builder` encodes records, `reader` checks and decodes them
(the only code that walks records; `_framing.c` is its compiled framing check), `compression`
holds the codecs and `varint` the zigzag varints. `aborted` says which fetched batches a
read_committed reader skips.
"""

from services.common.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedMagicError,
    batch_size_at,
    iter_batch_positions,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)
from services.common.records.builder import build_batch, build_control_batch, encode_headers
from services.common.records.compression import Compression
from services.common.records.reader import (
    ControlRecord,
    Record,
    RecordColumns,
    decode_batch,
    decode_columns,
    iter_batches,
    iter_records,
    parse_control_record,
)

__all__ = [
    "HEADER_SIZE", "LOG_OVERHEAD", "BatchHeader", "CorruptRecordError", "InvalidRecordError",
    "UnsupportedMagicError", "batch_size_at", "iter_batch_positions", "parse_header",
    "set_base_offset", "set_partition_leader_epoch", "validate_batch", "build_batch",
    "build_control_batch", "encode_headers", "Compression", "ControlRecord", "Record",
    "RecordColumns", "decode_batch", "decode_columns", "iter_batches", "iter_records",
    "parse_control_record",
]
