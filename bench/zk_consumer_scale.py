"""Scale run of the 0.8 ZooKeeper consumer: many partitions, members and streams in one group.

Starts its own cluster (ZooKeeper, one controller, three brokers; the `LocalCluster` launcher,
free ports, a temp dir), a topic of `--partitions` partitions with `--records` records each, and
`--members` connectors of `--streams` streams each in this process (one thread per stream). It
reports: how long until every partition is owned by exactly one thread (checked in ZooKeeper) and
every record is consumed; then, as more records are produced and one member shuts down while
reading them, how long until the others own everything again and have read every record, and
how many records were delivered twice.

    python bench/zk_consumer_scale.py [--partitions 60] [--members 5] [--streams 4] [--records 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.launcher import LocalCluster  # noqa: E402
from services.clients.lowlevel import LowLevelClient  # noqa: E402
from services.clients.zk_consumer import ConsumerTimeoutError, ZookeeperConsumerConnector  # noqa: E402
from services.common.proc import wait_until  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.topic_partition import TopicPartition  # noqa: E402
from services.common.zk import OdradekZkClient  # noqa: E402

TOPIC = "zk-scale"
GROUP = "zk-scale"
CLIENT = {"request_timeout_ms": 10000, "retry_backoff_ms": 50, "default_api_timeout_ms": 60000}
CONNECTOR = {"auto.offset.reset": "smallest", "rebalance.backoff.ms": 200, "rebalance.max.retries": 50,
             "auto.commit.interval.ms": 500, "consumer.timeout.ms": 200, "refresh.leader.backoff.ms": 100}


class Reader:
    def __init__(self):
        self.seen: Counter = Counter()
        self.lock = threading.Lock()

    def consume(self, stream) -> None:
        while True:
            try:
                for m in stream:
                    with self.lock:
                        self.seen[(m.partition, m.offset)] += 1
                return
            except ConsumerTimeoutError:
                continue

    def distinct(self) -> int:
        with self.lock:
            return len(self.seen)


def produce(client: LowLevelClient, partitions: int, records: int) -> None:
    batches = {(TOPIC, p): build_batch([b"x" * 100] * records) for p in range(partitions)}
    for tp, result in client.produce_many(batches, acks=-1).items():
        assert result.error_code == 0, (tp, result)


def owners(zk: OdradekZkClient, partitions: int) -> list[str | None]:
    return [zk.get_partition_owner(GROUP, TopicPartition(TOPIC, p)) for p in range(partitions)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--records", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(tmp, brokers=3, controllers=1, free_ports=True) as cluster:
        with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT) as admin, \
                LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT) as writer:
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])
            admin.wait_for_topic(TOPIC, 60, partitions=args.partitions)
            produce(writer, args.partitions, args.records)
            total = args.partitions * args.records
            reader = Reader()
            start = time.monotonic()
            members = []
            for i in range(args.members):
                connector = ZookeeperConsumerConnector({"zookeeper.connect": cluster.zookeeper_connect,
                                                        "group.id": GROUP, "consumer.id": f"m{i}", **CONNECTOR})
                for stream in connector.create_message_streams({TOPIC: args.streams})[TOPIC]:
                    threading.Thread(target=reader.consume, args=(stream,), daemon=True).start()
                members.append(connector)
            print(f"{args.members} members x {args.streams} streams started in {time.monotonic() - start:.2f} s")
            zk = members[0].zk
            threads = {f"{GROUP}_m{i}-{n}" for i in range(args.members) for n in range(args.streams)}
            wait_until(lambda: None not in owners(zk, args.partitions)
                       and set(owners(zk, args.partitions)) <= threads
                       and len(set(owners(zk, args.partitions))) == min(len(threads), args.partitions), 120)
            print(f"every partition owned once after {time.monotonic() - start:.2f} s; "
                  f"rebalances per member {[m.rebalance_count for m in members]}")
            wait_until(lambda: reader.distinct() >= total, 120)
            print(f"{total} records consumed after {time.monotonic() - start:.2f} s")
            produce(writer, args.partitions, args.records)
            leaving = members.pop()
            start = time.monotonic()
            leaving.shutdown()  # while the records just produced are being read
            print(f"one member shut down in {time.monotonic() - start:.2f} s")
            survivors = {t for t in threads if not t.startswith(leaving.consumer_id + "-")}
            wait_until(lambda: None not in owners(zk, args.partitions)
                       and set(owners(zk, args.partitions)) <= survivors, 120)
            print(f"survivors own everything after {time.monotonic() - start:.2f} s")
            wait_until(lambda: reader.distinct() >= 2 * total, 120)
            print(f"{total} more records consumed after {time.monotonic() - start:.2f} s; "
                  f"delivered twice: {sum(1 for c in reader.seen.values() if c > 1)}")
            for member in members:
                member.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
