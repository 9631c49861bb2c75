"""Fault runs with Jepsen-style verdicts: `--schedules` seeded fault schedules, one after another,
each under the fault workload on a new topic of one cluster, and a table of the results.

Starts its own cluster (ZooKeeper, one controller, three brokers, two coordinators; the
`LocalCluster` launcher, a temp dir, or `--keep` to keep it) with a broker
`zookeeper.session.timeout.ms` of 3000, so a broker cut off, killed or stopped loses its partitions
quickly. With `--hosts` (the default when `ip netns` can run here) every service and ZooKeeper has
a host of its own (a network namespace on a bridge of the run, torn down afterwards) and schedules
draw from every nemesis kind this machine can apply (isolate, split, one-way drop, link loss,
delay, jitter and reordering, pause, kill, clock skew), on every host; with `--loopback`, kills and
pauses of the brokers (`process_faults`).

Schedule i has seed `--seed` + i and is printed as a line that `Schedule.parse` (and `odradek dev
nemesis --replay`) replays. Each row: the faults, the acknowledged writes, every verdict of
`services.devcluster.faults.checker` and the seconds from the end of the faults until a produce
succeeded on every partition. The exit status is 1 if any verdict fired.

    python bench/faults.py [--hosts | --loopback] [--schedules 5] [--seed 1] [--seconds 30]
                           [--no-transactions] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.devcluster.faults.checker import Result  # noqa: E402
from services.devcluster.faults.process_faults import process_schedule  # noqa: E402
from services.devcluster.faults.workload import WorkloadConfig, run_with_faults  # noqa: E402
from services.devcluster.launcher import LocalCluster, hosts_for  # noqa: E402
from services.devcluster.nemesis import Nemesis, Schedule, available_kinds, run_schedule  # noqa: E402
from services.devcluster.netns import HostNetwork, unsupported_reason  # noqa: E402

CONTROLLERS, BROKERS, COORDINATORS = 1, 3, 2
BROKER_CONFIG = {"zookeeper.session.timeout.ms": 3000, "log.segment.delete.delay.ms": 0}
COORDINATOR_CONFIG = {"zookeeper.session.timeout.ms": 6000, "group.initial.rebalance.delay.ms": 300}


@contextlib.contextmanager
def host_network(on_hosts: bool) -> Iterator[HostNetwork | None]:
    if not on_hosts:
        yield None
        return
    network = HostNetwork(hosts_for(CONTROLLERS, BROKERS, COORDINATORS, 0))
    try:
        yield network.create()
    finally:
        network.teardown()


def run(args: argparse.Namespace, base: Path) -> list[Result]:
    results = []
    with host_network(args.hosts) as network, \
            LocalCluster(base / "cluster", brokers=BROKERS, controllers=CONTROLLERS, coordinators=COORDINATORS,
                         free_ports=network is None, network=network, broker_config=BROKER_CONFIG,
                         coordinator_config=COORDINATOR_CONFIG) as cluster:
        nemesis = Nemesis(cluster)
        kinds = available_kinds(nemesis) if network is not None else ()
        print(f"# {'hosts' if network else 'loopback'}; kinds: {', '.join(kinds) or 'kill, pause (brokers)'}; "
              f"{args.seconds:g} s of faults per schedule", flush=True)
        print(Result.table_header(), flush=True)

        def run_on_nemesis(cluster, schedule, stop_event, on_record=None):
            return run_schedule(nemesis, schedule, stop_event, on_record=on_record)

        for index in range(args.schedules):
            seed = args.seed + index
            if network is not None:
                schedule = Schedule.generate(seed, network.hosts, args.seconds, kinds=kinds)
            else:
                schedule = process_schedule(seed, cluster.broker_names, duration_s=args.seconds)
            print(f"  schedule {schedule}", flush=True)
            config = WorkloadConfig(topic=f"faults-{seed}", transactions=not args.no_transactions)
            started = time.monotonic()
            result = run_with_faults(cluster, schedule, run_on_nemesis, config,
                                     history_path=base / f"history-{seed}.jsonl")
            result.label = f"seed {seed}"
            results.append(result)
            print(f"{result.table_row()}   ({time.monotonic() - started:.0f} s)", flush=True)
            failed = [record for record in nemesis.records if not record.ok]
            for record in failed:
                print(f"  op failed: {record}", flush=True)
            nemesis.records.clear()
            if result.violations or result.errors:
                print(f"  {result.describe()}\n  errors: {result.errors}", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--hosts", action="store_true", default=None,
                       help="a host (network namespace) per service; the default when `ip netns` runs here")
    where.add_argument("--loopback", dest="hosts", action="store_false", help="every service on loopback")
    parser.add_argument("--schedules", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30.0, help="faults per schedule, in seconds")
    parser.add_argument("--no-transactions", action="store_true")
    parser.add_argument("--keep", type=Path, help="run in this directory and keep the logs and histories")
    args = parser.parse_args()
    reason = unsupported_reason()
    if args.hosts is None:
        args.hosts = reason is None
    elif args.hosts and reason is not None:
        parser.error(f"--hosts: cannot run services on hosts of their own here: {reason}")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        results = run(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="odradek-faults-") as tmp:
            results = run(args, Path(tmp))
    violations = sum(r.violations for r in results)
    print(f"{len(results)} schedules, {sum(r.acknowledged for r in results)} acknowledged writes, "
          f"{violations} violations")
    return 1 if violations or any(r.errors for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
