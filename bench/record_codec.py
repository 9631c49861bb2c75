"""Benchmark: RecordBatch v2 encode and decode of 100-byte records, Odradek's codec beside kafka-python's.

Both codecs encode the same records into batches of `--batch-records` and decode them back; the
best of `--repeat` rounds is reported in records/s with the ratio Odradek / kafka-python. Our
decode (`decode_columns`) checks each batch's CRC-32C and every record's framing, then extracts the
records. The `check` row is what a leader does to each produced batch, `check_batch_records` (the
framing check alone, compiled when built, after decompression within the default
`max.message.decompressed.bytes`), beside kafka-python's walk of the same records.

    python bench/record_codec.py [--records 200000] [--batch-records 1000] [--compression none]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402

from services.broker.log import LogConfig  # noqa: E402
from services.common.records import Compression, build_batch, decode_columns, parse_header  # noqa: E402
from services.common.records.reader import check_batch_records  # noqa: E402

MAX_DECOMPRESSED_BYTES = LogConfig().max_message_decompressed_bytes  # the leader's default bound


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--compression", default="none", choices=[c.name.lower() for c in Compression])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keys", action="store_true", help="give every record a 16-byte key")
    args = parser.parse_args()

    codec = Compression.parse(args.compression)
    value = os.urandom(args.record_bytes // 2).hex().encode()[: args.record_bytes]
    per_batch = args.batch_records
    batches = args.records // per_batch
    values = [value] * per_batch
    keys = [b"key-%012d" % i for i in range(per_batch)] if args.keys else None
    now_ms = int(time.time() * 1000)

    def odradek_encode():
        return [build_batch(values, keys, timestamps=now_ms, compression=codec) for _ in range(batches)]

    def kafka_encode():
        out = []
        for _ in range(batches):
            builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
            for i in range(per_batch):
                builder.append(i, now_ms, keys[i] if keys else None, value, [])
            out.append(bytes(builder.build()))
        return out

    ours = odradek_encode()
    theirs = kafka_encode()

    def odradek_decode():
        for batch in ours:
            decode_columns(batch)

    def odradek_check():
        for batch in ours:
            check_batch_records(batch, 0, parse_header(batch), MAX_DECOMPRESSED_BYTES)

    def kafka_decode():
        for batch in theirs:
            for record in DefaultRecordBatch(batch):
                record.value  # noqa: B018 - touch the field a consumer would read

    total = batches * per_batch
    rows = []
    for name, ours_fn, theirs_fn in (("encode", odradek_encode, kafka_encode),
                                     ("decode", odradek_decode, kafka_decode),
                                     ("check", odradek_check, kafka_decode)):
        ours_s = best_of(args.repeat, ours_fn)
        theirs_s = best_of(args.repeat, theirs_fn)
        rows.append((name, total / ours_s, total / theirs_s))

    print(f"records={total} record_bytes={args.record_bytes} batch_records={per_batch} "
          f"compression={codec.name.lower()} keys={'yes' if args.keys else 'no'}")
    print(f"{'op':<8}{'odradek rec/s':>16}{'kafka-python rec/s':>22}{'ratio':>8}")
    for name, ours_rate, theirs_rate in rows:
        print(f"{name:<8}{ours_rate:>16,.0f}{theirs_rate:>22,.0f}{ours_rate / theirs_rate:>7.2f}x")


if __name__ == "__main__":
    main()
