"""`odradek jobs run JOB [OPTIONS]`: runs one of Odradek's Spark jobs from `jobs/` against a
gateway, as `python -m jobs.<job> run OPTIONS` does.

    odradek jobs run clickstream [--gateway URL] [--master spark://HOST:PORT] [--events N] [--seed S] ...
        new topics, generated traffic, the streaming job, the backfill, and their comparison
        (exit code 1 when the outputs differ from what was sent)

The jobs are not installed with the package: they run from a checkout, found on the path (an
editable install puts the checkout there) or in the working directory.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TextIO

JOBS = ("clickstream",)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("jobs", help="run a Spark job against a gateway",
                                   description="Run one of Odradek's Spark jobs (local[2], or a Spark cluster's "
                                               "--master) against a gateway.")
    commands = parser.add_subparsers(dest="jobs_command", required=True, metavar="{run}")
    run = commands.add_parser("run", help="run a job end to end",
                              description="Run a job end to end; options after the job's name are the job's "
                                          "(`odradek jobs run clickstream --help`).")
    run.add_argument("job", choices=JOBS)
    run.add_argument("job_args", nargs=argparse.REMAINDER, help="the job's own options")
    run.set_defaults(run=run_job)
    return parser


def run_job(args: argparse.Namespace, out: TextIO) -> int:
    try:
        job = job_module(args.job)
    except ModuleNotFoundError as error:
        if error.name != "pyspark":
            raise
        print("The jobs need PySpark: pip install 'odradek[spark]'.", file=out)
        return 1
    if job is None:
        print(f"The job {args.job!r} runs from a checkout of Odradek: run this command from its root "
              f"(where jobs/{args.job}/ is).", file=out)
        return 1
    return job.main(["run", *args.job_args])


def job_module(job: str) -> ModuleType | None:
    """The job's `__main__` module, from the path or else from the working directory; None without either."""
    if importlib.util.find_spec("jobs") is None:
        if not (Path.cwd() / "jobs" / job / "__main__.py").is_file():
            return None
        sys.path.insert(0, str(Path.cwd()))
    return importlib.import_module(f"jobs.{job}.__main__")
