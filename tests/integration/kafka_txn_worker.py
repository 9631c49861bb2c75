"""A consume-transform-produce worker on librdkafka (confluent-kafka), in a process of its own, for
tests that kill it with SIGKILL.

    python -m tests.integration.kafka_txn_worker --bootstrap B --group G --input I --output O
        --transactional-id T [--instance-id W] [--batch 10]

It subscribes to `I` in group `G` (read_committed; a static member when given `--instance-id`),
writes each record's value prefixed with "out-" to the same partition of `O`, and sends the input
positions to the same transaction, one transaction per batch of at most `--batch` records. A
transaction that fails is aborted and the positions go back to the committed offsets. It prints one
JSON line when a transaction's records are written (`{"event": "written", "records": n}`) and one
when it commits (`{"event": "committed", "records": n}`); SIGTERM closes it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from confluent_kafka import Consumer, KafkaException, Producer

TIMEOUT_S = 30.0


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets of every assigned partition."""
    for tp in consumer.committed(consumer.assignment(), timeout=TIMEOUT_S):
        if tp.offset >= 0:
            consumer.seek(tp)


def transform_once(consumer: Consumer, producer: Producer, output: str, batch: int) -> int:
    messages = [m for m in consumer.consume(num_messages=batch, timeout=0.2) if m.error() is None]
    if not messages:
        return 0
    producer.begin_transaction()
    try:
        for message in messages:
            producer.produce(output, b"out-" + message.value(), key=message.key(), partition=message.partition())
        producer.flush(TIMEOUT_S)
        emit(event="written", records=len(messages))  # on the log, in the open transaction
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
    except KafkaException as exc:
        if not exc.args[0].txn_requires_abort():
            raise
        emit(event="aborting", error=str(exc.args[0]))
        producer.abort_transaction(TIMEOUT_S)
        rewind(consumer)
        return 0
    emit(event="committed", records=len(messages))
    return len(messages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    for flag in ("--bootstrap", "--group", "--input", "--output", "--transactional-id"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--instance-id")
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer_config = {"bootstrap.servers": args.bootstrap, "group.id": args.group,
                       "isolation.level": "read_committed", "enable.auto.commit": False,
                       "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                       "heartbeat.interval.ms": 500}
    if args.instance_id:
        consumer_config["group.instance.id"] = args.instance_id
    consumer = Consumer(consumer_config)
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
                         "transaction.timeout.ms": 10000, "linger.ms": 5})
    try:
        producer.init_transactions(TIMEOUT_S)
        consumer.subscribe([args.input])
        emit(event="started")
        while not stop.is_set():
            transform_once(consumer, producer, args.output, args.batch)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
