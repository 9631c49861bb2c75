"""Fault runs with Jepsen-style verdicts: `--schedules` seeded fault schedules, one after another,
each under the fault workload on a new topic of one cluster, and a table of the results.

Starts its own cluster (ZooKeeper, one controller, three brokers, two coordinators; the
`LocalCluster` launcher, free ports, a temp dir, or `--keep` to keep it) with a broker
`zookeeper.session.timeout.ms` of 3000, so a killed or stopped broker's partitions move quickly.
Schedule i has seed `--seed` + i; a row's seed replays it. Each row: the faults, the acknowledged
writes, every verdict of `services.devcluster.faults.checker` and the seconds from the end of the
faults until a produce succeeded on every partition. The exit status is 1 if any verdict fired.

The faults are `FAULTS`' (process faults on loopback: kill -9 and restart, SIGSTOP and SIGCONT of
brokers). Another library with `Schedule.generate(seed, hosts, duration_s=...)` and
`run_schedule(cluster, schedule, stop_event)` (taking `on_fault=`, or returning records of ops with
a `kind`) plugs in by changing that import; `run_with_faults` records its faults either way.

    python bench/faults.py [--schedules 5] [--seed 1] [--seconds 30] [--no-transactions] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.devcluster.faults import process_faults as FAULTS  # noqa: E402, N812
from services.devcluster.faults.checker import Result  # noqa: E402
from services.devcluster.faults.workload import WorkloadConfig, run_with_faults  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402

BROKER_CONFIG = {"zookeeper.session.timeout.ms": 3000, "log.segment.delete.delay.ms": 0}
COORDINATOR_CONFIG = {"zookeeper.session.timeout.ms": 6000, "group.initial.rebalance.delay.ms": 300}


def run(args: argparse.Namespace, base: Path) -> list[Result]:
    results = []
    with LocalCluster(base / "cluster", brokers=3, controllers=1, coordinators=2, free_ports=True,
                      broker_config=BROKER_CONFIG, coordinator_config=COORDINATOR_CONFIG) as cluster:
        print(Result.table_header(), flush=True)
        for index in range(args.schedules):
            seed = args.seed + index
            schedule = FAULTS.Schedule.generate(seed, cluster.broker_names, duration_s=args.seconds)
            config = WorkloadConfig(topic=f"faults-{seed}", transactions=not args.no_transactions)
            result = run_with_faults(cluster, schedule, FAULTS.run_schedule, config,
                                     history_path=base / f"history-{seed}.jsonl")
            result.label = f"seed {seed}"
            results.append(result)
            print(result.table_row(), flush=True)
            if result.violations or result.errors:
                print(f"  {schedule.describe()}\n  {result.describe()}\n  errors: {result.errors}", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30.0, help="faults per schedule, in seconds")
    parser.add_argument("--no-transactions", action="store_true")
    parser.add_argument("--keep", type=Path, help="run in this directory and keep the logs and histories")
    args = parser.parse_args()
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
