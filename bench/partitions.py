"""Benchmark: what one topic of thousands of partitions costs the controller and the cluster.

Starts its own cluster (ZooKeeper, two controllers, three brokers; the `LocalCluster` launcher,
free ports, a temp dir) with `zookeeper.session.timeout.ms` = 6000, creates one topic of
`--partitions` partitions at replication factor 3 and prints, in order:

1. create: from the CreateTopics call until every partition has a live leader in every broker's
   metadata and one ProduceRequest per leader (acks=1) to every partition has succeeded;
2. controlled shutdown: SIGTERM of a broker until metadata shows no partition led by it (its
   controlled shutdown moved its leaders away), and until its process has exited; it is then
   started again;
3. re-elect: once every partition another broker leads has a second replica in its ISR (the wait
   is printed: it is the brokers' replication catching up), kill -9 of that broker until no
   partition is led by it any more in metadata (the session timeout is part of it: ZooKeeper must
   first expire the dead broker), after which it is started again;
4. controller failover: kill -9 of the active controller until `/controller` names the other one,
   and until that one answers DescribeCluster as active (its failover, which reads every partition
   state and sends UpdateMetadata / LeaderAndIsr, is done);
5. RSS in MiB of every service process, after the cluster started and at the end.

    python bench/partitions.py [--partitions 4000] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.lowlevel import LowLevelClient  # noqa: E402
from services.common.pb.odradek.controller.v1 import controller_pb2, controller_pb2_grpc  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.service import node_channel  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import pid_alive, wait_until  # noqa: E402

SESSION_TIMEOUT_MS = 6000
TOPIC = "wide"
REPLICATION_FACTOR = 3
STEP_TIMEOUT_S = 600
CLIENT_CONFIG = {"request_timeout_ms": 60000, "retry_backoff_ms": 100, "default_api_timeout_ms": 300000}


def rss_mib(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def print_rss(cluster: LocalCluster, when: str) -> None:
    sizes = ", ".join(f"{name} {rss_mib(cluster.running_pid(name)):.0f}" for name in cluster.all_names)
    print(f"RSS MiB {when}: {sizes}")


def leaders(admin: Admin) -> dict[int, int]:
    (description,) = admin.describe_topics([TOPIC]).values()
    return {p.partition: p.leader for p in description.partitions}


def led_by(admin: Admin, broker_id: int) -> int:
    return sum(1 for leader in leaders(admin).values() if leader == broker_id)


def timed(what: str, step: Callable[[], object]) -> float:
    start = time.monotonic()
    step()
    took = time.monotonic() - start
    print(f"  {what}: {took:.2f} s")
    return took


def produce_everywhere(cluster: LocalCluster, partitions: int) -> None:
    batch = build_batch([b"x" * 100])
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        results = client.produce_many({(TOPIC, p): batch for p in range(partitions)}, acks=1,
                                      retry_timeout_ms=STEP_TIMEOUT_S * 1000)
    failed = {tp: r.error_code for tp, r in results.items() if r.error_code}
    if failed or len(results) != partitions:
        raise RuntimeError(f"produce failed for {len(failed)} partitions, e.g. {sorted(failed.items())[:3]}")


def fully_replicated(admin: Admin) -> bool:
    (description,) = admin.describe_topics([TOPIC]).values()
    return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in description.partitions)


def leaders_replaceable(admin: Admin, broker_id: int) -> bool:
    """Whether every partition `broker_id` leads has another replica in its ISR to take over."""
    (description,) = admin.describe_topics([TOPIC]).values()
    return all(len(p.isr) > 1 for p in description.partitions if p.leader == broker_id)


def restart_broker(cluster: LocalCluster, broker_id: int) -> None:
    """Starts a stopped broker and waits until it serves (not until it is back in every ISR: at
    thousands of partitions that is the brokers' replication, not the controller, at work)."""
    name = cluster.broker_name(broker_id)
    pid = cluster.start_service(name, wait=False)
    wait_until(lambda: cluster.is_serving(name) or not pid_alive(pid), STEP_TIMEOUT_S, 0.2,
               message=f"{name} to serve")
    if not pid_alive(pid):
        raise RuntimeError(f"{name} exited while starting")


def active_controller(cluster: LocalCluster) -> str | None:
    for name in cluster.controller_names:
        channel = node_channel(cluster.endpoint(name))
        try:
            stub = controller_pb2_grpc.ControllerServiceStub(channel)
            if stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=10).error_code == 0:
                return name
        except Exception:  # a controller being killed or starting
            continue
        finally:
            channel.close()
    return None


def measure(cluster: LocalCluster, admin: Admin, partitions: int) -> None:
    print(f"create: one topic of {partitions} partitions, replication factor {REPLICATION_FACTOR}")

    def create() -> None:
        admin.create_topics([NewTopic(TOPIC, partitions, REPLICATION_FACTOR)], timeout_ms=STEP_TIMEOUT_S * 1000)
        admin.wait_for_topic(TOPIC, STEP_TIMEOUT_S, partitions=partitions)
        produce_everywhere(cluster, partitions)

    timed("created, led everywhere and produced to every partition", create)
    wait_until(lambda: fully_replicated(admin), STEP_TIMEOUT_S, 1.0, message="every replica in its ISR")

    victim = 2
    print(f"controlled shutdown: SIGTERM of broker {victim}, which leads {led_by(admin, victim)} partitions")
    pid = cluster.signal_service(cluster.broker_name(victim), signal.SIGTERM)
    start = time.monotonic()
    moved_s = exited_s = None
    while moved_s is None or exited_s is None:
        if time.monotonic() - start > STEP_TIMEOUT_S:
            raise TimeoutError(f"broker {victim} did not shut down within {STEP_TIMEOUT_S} s")
        if moved_s is None and led_by(admin, victim) == 0:
            moved_s = time.monotonic() - start
        if exited_s is None and not pid_alive(pid):
            exited_s = time.monotonic() - start
        time.sleep(0.1)
    print(f"  no partition led by it in metadata: {moved_s:.2f} s")
    print(f"  process exited: {exited_s:.2f} s")
    timed("restarted and serving", lambda: restart_broker(cluster, victim))

    victim = 1
    print(f"re-elect: kill -9 of broker {victim} (zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS})")
    timed(f"waited until every partition broker {victim} leads has another replica in its ISR",
          lambda: wait_until(lambda: leaders_replaceable(admin, victim), STEP_TIMEOUT_S, 1.0,
                             message=f"another ISR member for every partition led by broker {victim}"))
    print(f"  broker {victim} leads {led_by(admin, victim)} partitions; killed")
    cluster.kill_service(cluster.broker_name(victim))
    timed("no partition led by it in metadata",
          lambda: wait_until(lambda: led_by(admin, victim) == 0, STEP_TIMEOUT_S, 0.2, message="new leaders"))
    timed("restarted and serving", lambda: restart_broker(cluster, victim))

    active = wait_until(lambda: active_controller(cluster), 60, 0.2, message="an active controller")
    (standby,) = [n for n in cluster.controller_names if n != active]
    print(f"controller failover: kill -9 of {active} (zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS})")
    cluster.kill_service(active)
    start = time.monotonic()
    wait_until(lambda: active_controller(cluster) == standby, STEP_TIMEOUT_S, 0.05, message=f"{standby} active")
    print(f"  {standby} active (failover done): {time.monotonic() - start:.2f} s")
    produce_everywhere(cluster, partitions)
    print(f"  and a produce to every partition succeeded: {time.monotonic() - start:.2f} s")
    cluster.start_service(active)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=4000)
    parser.add_argument("--keep-logs", type=Path, default=None,
                        help="run the cluster in this new directory and keep it (logs, data) afterwards")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        session = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS}
        cluster = LocalCluster(args.keep_logs or Path(tmp) / "cluster", brokers=3, controllers=2, free_ports=True,
                               broker_config=session, controller_config=session)
        try:
            cluster.start()
            print(f"cluster: 3 brokers, 2 controllers, {os.cpu_count()} CPUs")
            print_rss(cluster, "before")
            with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
                measure(cluster, admin, args.partitions)
            print_rss(cluster, "after")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
