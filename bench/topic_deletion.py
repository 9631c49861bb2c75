"""Benchmark: how long deleting one topic of thousands of partitions takes, brokers included.

Starts its own cluster (ZooKeeper, one controller, three brokers; the `LocalCluster` launcher, free
ports, a temp dir, `log.segment.delete.delay.ms` (`file.delete.delay.ms` of every topic) = 0 as
the tests use, or `--file-delete-delay-ms`), and for each size in
`--partitions` creates a topic of that many partitions at replication factor 3, waits until it is
led everywhere, deletes it and prints:

1. gone from metadata and ZooKeeper: from the DeleteTopics call until no broker's metadata lists
   the topic, `/brokers/topics/<t>` and `/admin/delete_topics/<t>` are gone;
2. gone from disk: until no broker's log dir holds a directory of the topic (live or `-delete`),
   which is the brokers' StopReplica work plus `file.delete.delay.ms`; printed with the
   directories still left if `--timeout-s` passes first.

    python bench/topic_deletion.py [--partitions 1000 4000] [--timeout-s 900] [--file-delete-delay-ms 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kazoo.client import KazooClient  # noqa: E402

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.common.zk import OdradekZkClient  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import wait_until  # noqa: E402

REPLICATION_FACTOR = 3
CLIENT_CONFIG = {"request_timeout_ms": 60000, "retry_backoff_ms": 100, "default_api_timeout_ms": 300000}
BROKER_CONFIG = {"zookeeper.session.timeout.ms": 6000}


def topic_dirs(cluster: LocalCluster, topic: str) -> int:
    """Directories of `topic` (live or renamed for deletion) in every broker's log dir."""
    prefix = f"{topic}-"
    count = 0
    for name in cluster.broker_names:
        data = cluster.data_dir(name)
        if data.is_dir():
            count += sum(1 for entry in os.scandir(data) if entry.is_dir() and entry.name.startswith(prefix))
    return count


def gone_from_metadata_and_zookeeper(admin: Admin, zk: OdradekZkClient, topic: str) -> bool:
    return (topic not in zk.get_all_topics() and topic not in zk.get_topic_deletions()
            and topic not in admin.list_topics())


def measure(cluster: LocalCluster, admin: Admin, zk: OdradekZkClient, partitions: int, timeout_s: float) -> None:
    topic = f"doomed-{partitions}"
    admin.create_topics([NewTopic(topic, partitions, REPLICATION_FACTOR)], timeout_ms=int(timeout_s * 1000))
    admin.wait_for_topic(topic, timeout_s, partitions=partitions)
    wait_until(lambda: topic_dirs(cluster, topic) == partitions * REPLICATION_FACTOR, timeout_s, 0.5,
               message="every replica's log directory")
    print(f"topic of {partitions} partitions, replication factor {REPLICATION_FACTOR}: "
          f"{topic_dirs(cluster, topic)} log directories")
    start = time.monotonic()
    admin.delete_topics([topic], timeout_ms=int(timeout_s * 1000))
    wait_until(lambda: gone_from_metadata_and_zookeeper(admin, zk, topic), timeout_s, 0.2,
               message="topic gone from metadata and ZooKeeper")
    print(f"  gone from metadata and ZooKeeper: {time.monotonic() - start:.2f} s")
    deadline = start + timeout_s
    while topic_dirs(cluster, topic) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = topic_dirs(cluster, topic)
    took = time.monotonic() - start
    if left:
        print(f"  gone from disk: NOT within {took:.0f} s, {left} directories left")
    else:
        print(f"  gone from disk: {took:.2f} s ({partitions * REPLICATION_FACTOR / took:.0f} logs/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--file-delete-delay-ms", type=int, default=0)
    args = parser.parse_args()

    broker_config = {**BROKER_CONFIG, "log.segment.delete.delay.ms": args.file_delete_delay_ms}
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, controllers=1, free_ports=True,
                               broker_config=broker_config)
        zk_client = None
        try:
            cluster.start()
            print(f"cluster: 3 brokers, 1 controller, {os.cpu_count()} CPUs, "
                  f"file.delete.delay.ms={args.file_delete_delay_ms}")
            zk_client = KazooClient(hosts=cluster.zookeeper_connect)
            zk_client.start()
            with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
                for partitions in args.partitions:
                    measure(cluster, admin, OdradekZkClient(zk_client), partitions, args.timeout_s)
        finally:
            if zk_client is not None:
                zk_client.stop()
                zk_client.close()
            cluster.stop()


if __name__ == "__main__":
    main()
