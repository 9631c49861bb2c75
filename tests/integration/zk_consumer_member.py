"""A 0.8 ZooKeeper consumer in a process of its own, for tests that kill it with SIGKILL.

    python -m tests.integration.zk_consumer_member --zookeeper Z --group G --topic T
        --consumer-id C [--streams 1] [--session-timeout-ms 4000]

It consumes every stream in a thread of its own with auto-commit every 100 ms and prints one line
per message (`<partition> <offset>`). SIGTERM shuts the connector down and exits.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from services.clients.zk_consumer import ConsumerTimeoutError, ZookeeperConsumerConnector


def consume(stream, lock: threading.Lock) -> None:
    while True:
        try:
            for message in stream:
                with lock:
                    sys.stdout.write(f"{message.partition} {message.offset}\n")
                    sys.stdout.flush()
            return
        except ConsumerTimeoutError:
            continue


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--zookeeper", "--group", "--topic", "--consumer-id"):
        parser.add_argument(name, required=True)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    args = parser.parse_args()
    connector = ZookeeperConsumerConnector({
        "zookeeper.connect": args.zookeeper, "group.id": args.group, "consumer.id": args.consumer_id,
        "zookeeper.session.timeout.ms": args.session_timeout_ms, "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": 100, "consumer.timeout.ms": 500, "rebalance.backoff.ms": 200,
        "rebalance.max.retries": 30, "refresh.leader.backoff.ms": 100})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lock = threading.Lock()
    for stream in connector.create_message_streams({args.topic: args.streams})[args.topic]:
        threading.Thread(target=consume, args=(stream, lock), daemon=True).start()
    stop.wait()
    connector.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
