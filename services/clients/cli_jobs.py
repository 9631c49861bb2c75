"""`odradek jobs run JOB [OPTIONS]`: runs one of Odradek's Spark jobs from `jobs/` against a
gateway, as `python -m jobs.<job> run OPTIONS` does.

    odradek jobs run clickstream [--gateway URL] [--events N] [--seed S] ...
        new topics, generated traffic, the streaming job, the backfill, and their comparison
        (exit code 1 when the outputs differ from what was sent)
"""

from __future__ import annotations

import argparse
import importlib
from typing import TextIO

JOBS = ("clickstream",)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("jobs", help="run a Spark job against a gateway",
                                   description="Run one of Odradek's Spark jobs (local[2]) against a gateway.")
    commands = parser.add_subparsers(dest="jobs_command", required=True, metavar="{run}")
    run = commands.add_parser("run", help="run a job end to end",
                              description="Run a job end to end; options after the job's name are the job's "
                                          "(`odradek jobs run clickstream --help`).")
    run.add_argument("job", choices=JOBS)
    run.add_argument("job_args", nargs=argparse.REMAINDER, help="the job's own options")
    run.set_defaults(run=run_job)
    return parser


def run_job(args: argparse.Namespace, out: TextIO) -> int:
    job = importlib.import_module(f"jobs.{args.job}.__main__")
    return job.main(["run", *args.job_args])
