"""A consumer-group member in a process of its own, for tests that kill members with SIGKILL.

    python -m tests.integration.group_member --bootstrap B --group G --topic T [--assignor range]
        [--session-timeout-ms 6000] [--commit] [--instance-id I]

It subscribes, polls in a loop and prints one JSON line per event on stdout:
`{"event": "assigned", "partitions": [[topic, p], ...]}` after every rebalance (its whole current
assignment), `{"event": "records", "values": [...]}` for what a poll returned (with --commit, after
a synchronous commit of them). SIGTERM closes the consumer (leaving the group) and exits.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from services.clients.consumer import Consumer
from services.clients.consumer.listener import ConsumerRebalanceListener


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Reporter(ConsumerRebalanceListener):
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def on_partitions_revoked(self, partitions) -> None:
        emit(event="revoked", partitions=sorted([tp.topic, tp.partition] for tp in partitions))

    def on_partitions_assigned(self, partitions) -> None:
        emit(event="assigned", partitions=sorted([tp.topic, tp.partition] for tp in self.consumer.assignment()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--client-id", default="member")
    parser.add_argument("--commit", action="store_true")
    parser.add_argument("--instance-id", help="group.instance.id (static membership)")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = Consumer(bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
                        auto_offset_reset="earliest", enable_auto_commit=False,
                        session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=500,
                        partition_assignment_strategy=args.assignor, fetch_max_wait_ms=100,
                        group_instance_id=args.instance_id,
                        request_timeout_ms=5000, retry_backoff_ms=50)
    consumer.subscribe([args.topic], listener=Reporter(consumer))
    try:
        while not stop.is_set():
            records = list(consumer.poll(timeout_ms=200))
            if records:
                if args.commit:
                    consumer.commit_sync()
                emit(event="records", values=[r.value.decode() for r in records])
    finally:
        consumer.close()
        emit(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
