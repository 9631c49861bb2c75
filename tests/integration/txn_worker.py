"""A consume-transform-produce worker in a process of its own, for tests that kill it with SIGKILL.

    python -m tests.integration.txn_worker --bootstrap B --group G --input I --output O
        --transactional-id T [--max-poll-records 20]

It reads `I` in group `G` (read_committed), writes each record's value prefixed with "out-" to the
same partition of `O`, and commits the input offsets in the same transaction, one transaction per
poll. A transaction that fails is aborted and the positions go back to the committed offsets.
It prints one JSON line per committed transaction (`{"event": "committed", "records": n}`);
SIGTERM closes it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from services.clients.consumer import Consumer, OffsetAndMetadata
from services.clients.producer import Producer
from services.common.errors import KafkaError


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def transform_once(consumer: Consumer, producer: Producer, output: str) -> int:
    records = list(consumer.poll(timeout_ms=200))
    if not records:
        return 0
    producer.begin_transaction()
    offsets = {}
    for record in records:
        producer.send(output, b"out-" + record.value, key=record.key, partition=record.partition)
        offsets[(record.topic, record.partition)] = OffsetAndMetadata(record.offset + 1)
    producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
    producer.commit_transaction()
    return len(records)


def rewind(consumer: Consumer) -> None:
    """Back to the committed offsets (or the beginning) after an aborted transaction."""
    assigned = consumer.assignment()
    committed = consumer.committed(assigned)
    for tp in assigned:
        if committed.get(tp) is not None:
            consumer.seek(tp, committed[tp].offset)
        else:
            consumer.seek_to_beginning(tp)


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--group", "--input", "--output", "--transactional-id"):
        parser.add_argument(name, required=True)
    parser.add_argument("--max-poll-records", type=int, default=20)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    common = {"bootstrap_servers": args.bootstrap, "request_timeout_ms": 5000, "retry_backoff_ms": 50}
    consumer = Consumer(group_id=args.group, auto_offset_reset="earliest", enable_auto_commit=False,
                        isolation_level="read_committed", session_timeout_ms=6000, heartbeat_interval_ms=500,
                        max_poll_records=args.max_poll_records, fetch_max_wait_ms=100, **common)
    producer = Producer(transactional_id=args.transactional_id, **common)
    try:
        producer.init_transactions()
        consumer.subscribe([args.input])
        while not stop.is_set():
            try:
                count = transform_once(consumer, producer, args.output)
            except KafkaError as error:
                emit(event="aborting", error=str(error))
                producer.abort_transaction()
                rewind(consumer)
                continue
            if count:
                emit(event="committed", records=count)
    finally:
        producer.close(5)
        consumer.close()
        emit(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
