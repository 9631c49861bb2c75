"""`odradek dev spark up|down|status`: a Spark standalone cluster (a master and two workers, see
`spark_standalone`) under `<dir>/spark`, for running Odradek's Spark jobs on a cluster
(`odradek jobs run clickstream --master spark://...`).

`up` starts it, waits until the master lists every worker ALIVE and prints the master URL and web
UI (a cluster already running from the directory is reported, not started twice); `down` stops
the JVMs its `spark.json` records; `status` prints them and exits with 1 when none runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from services.devcluster.spark_standalone import (
    SparkNotInstalledError,
    SparkStandalone,
    SparkStartError,
    read_state,
    running_pids,
    stop_detached,
)


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser("spark", help="run a local Spark standalone cluster (a master and workers)",
                                 description="Run a Spark standalone cluster on 127.0.0.1 from the installed PySpark.")
    spark_commands = parser.add_subparsers(dest="spark_command", required=True, metavar="{up,down,status}")
    up = spark_commands.add_parser("up", help="start a master and the workers; print the master URL")
    up.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    up.add_argument("--worker-cores", type=int, default=1, help="cores each worker offers (default 1)")
    up.add_argument("--worker-memory", default="1g", help="memory each worker offers (default 1g)")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the workers (default 90)")
    up.set_defaults(run=run_up)
    down = spark_commands.add_parser("down", help="stop the master and the workers")
    down.set_defaults(run=run_down)
    status = spark_commands.add_parser("status", help="show the master URL and the JVMs; exit 1 if none runs")
    status.set_defaults(run=run_status)
    for sub in (up, down, status):
        sub.add_argument("--dir", default="./var", help="the cluster's directory; Spark's is <dir>/spark "
                                                        "(default ./var)")
    return parser


def spark_dir(args: argparse.Namespace) -> Path:
    return Path(args.dir) / "spark"


def run_up(args: argparse.Namespace, out: TextIO) -> int:
    base = spark_dir(args)
    if running_pids(base):
        print(f"A Spark cluster is already running in {base.resolve()}.", file=out)
        return run_status(args, out)
    cluster = SparkStandalone(base, workers=args.workers, worker_cores=args.worker_cores,
                              worker_memory=args.worker_memory)
    print(f"Starting a Spark master and {args.workers} worker(s) ({args.worker_cores} core(s), "
          f"{args.worker_memory} each) in {cluster.base_dir} ...", file=out, flush=True)
    try:
        cluster.start(timeout_s=args.timeout)
    except (SparkNotInstalledError, SparkStartError, OSError) as error:
        print(f"Failed to start the Spark cluster: {error}", file=out)
        return 1
    print(f"Spark master: {cluster.master_url}  (web UI {cluster.web_ui_url})", file=out)
    print(f"Run the clickstream pipeline on it: odradek jobs run clickstream --master {cluster.master_url}",
          file=out)
    print(f"Stop it: odradek dev spark down --dir {args.dir}", file=out)
    return 0


def run_down(args: argparse.Namespace, out: TextIO) -> int:
    stopped = stop_detached(spark_dir(args))
    print(f"Stopped {', '.join(stopped)}." if stopped else "No Spark cluster was running.", file=out)
    return 0


def run_status(args: argparse.Namespace, out: TextIO) -> int:
    base = spark_dir(args)
    state = read_state(base) or {}
    pids = running_pids(base)
    if not pids:
        print(f"No Spark cluster is running in {base.resolve()}.", file=out)
        return 1
    print(f"Spark master: {state.get('master_url')}  (web UI {state.get('web_ui_url')})", file=out)
    for name in sorted(state.get("pids", {})):
        pid = pids.get(name)
        print(f"  {name:<10} {'pid ' + str(pid) if pid else 'down'}", file=out)
    return 0
