"""Benchmark: what the Kafka protocol listener's codec (kio) costs on the data path, per request.

Decodes Produce v9 requests (header and body) and encodes Fetch v12 responses (header and body)
of `--partitions` partitions, each carrying one record batch of `--batch-bytes`, the way
`services.common.kafka_wire` does for each request; the batches pass through as bytes. Reports the
best of `--repeat` rounds of `--requests` requests: microseconds per request and per partition.

    python bench/kafka_wire_codec.py [--partitions 1,10,100] [--batch-bytes 16384] [--requests 2000]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kio.schema.fetch.v12 import response as fetch_response  # noqa: E402
from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData  # noqa: E402

from services.common.errors import Errors  # noqa: E402
from services.common.kafka_wire import fields_of, kafka_error  # noqa: E402
from services.common.kafka_wire.codec import api_schema, decode_request, encode_response  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from tests.kafka_wire_support import request_frame  # noqa: E402


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def decode_produces(schema, frame: bytes, requests: int) -> None:
    for _ in range(requests):
        decode_request(schema, frame)


def encode_fetches(schema, batch: bytes, partitions: int, requests: int) -> None:
    """Fetch responses built as the broker's handler builds them, then encoded."""
    for _ in range(requests):
        parts = tuple(fields_of(fetch_response.PartitionData, partition_index=i, error_code=kafka_error(Errors.NONE),
                                high_watermark=1000, last_stable_offset=1000, log_start_offset=0,
                                aborted_transactions=None, preferred_read_replica=-1, records=batch)
                      for i in range(partitions))
        encode_response(schema, 1, fields_of(schema.response_type, error_code=kafka_error(Errors.NONE), session_id=7,
                                             responses=(fetch_response.FetchableTopicResponse(topic="bench",
                                                                                              partitions=parts),)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1,10,100")
    parser.add_argument("--batch-bytes", type=int, default=16384)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    batch = build_batch([b"x" * 100] * max(1, args.batch_bytes // 110))
    produce, fetch = api_schema(0, 9), api_schema(1, 12)
    print(f"batch of {len(batch)} bytes per partition; best of {args.repeat} x {args.requests} requests")
    print(f"{'partitions':>10} {'produce decode us':>18} {'per partition':>14} {'fetch encode us':>16} "
          f"{'per partition':>14}")
    for count in (int(p) for p in args.partitions.split(",")):
        frame = request_frame(0, 9, 1, acks=-1, timeout=timedelta(seconds=30), transactional_id=None,
                              topic_data=(TopicProduceData(name="bench", partition_data=tuple(
                                  PartitionProduceData(index=i, records=batch) for i in range(count))),))[4:]
        header, request = decode_request(produce, frame)
        assert bytes(request.topic_data[0].partition_data[0].records) == batch
        requests = args.requests // max(1, count // 10)
        decode_s = best_of(args.repeat, functools.partial(decode_produces, produce, frame, requests))
        encode_s = best_of(args.repeat, functools.partial(encode_fetches, fetch, batch, count, requests))
        decode_us, encode_us = decode_s / requests * 1e6, encode_s / requests * 1e6
        print(f"{count:>10} {decode_us:>18.1f} {decode_us / count:>14.2f} {encode_us:>16.1f} "
              f"{encode_us / count:>14.2f}")


if __name__ == "__main__":
    main()
