"""`odradek log-dirs`: Kafka's kafka-log-dirs.sh on the admin client.

    --describe [--broker-list 1,2] [--topic-list a,b]
        asks each broker (by default every live broker) for its log dirs and prints
        `Querying brokers for log directories information`,
        `Received log directory information from brokers 1,2` and then one line of JSON:
        {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data/1","error":null,
        "partitions":[{"partition":"t-0","size":1024,"offsetLag":0,"isFuture":false}]}]}]}
        `size` is the log's bytes on disk, `offsetLag` max(high watermark - log end offset, 0);
        a log dir's `error` is its error's name or null. --topic-list keeps those topics' partitions.

It takes --bootstrap-server and --command-config; a failure prints `Error: <message>` and exits
with 1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from services.clients.admin import Admin
from services.clients.admin_types import LogDirDescription
from services.clients.cli_groups import run_admin_command
from services.clients.cli_partitions import _add_common


class LogDirsCommandError(Exception):
    """A user error, reported as the command's failure."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("log-dirs", help="describe the brokers' log directories",
                                   description="Query the brokers for their log directories and the "
                                               "partition logs in them.")
    _add_common(parser)
    parser.add_argument("--describe", action="store_true", help="describe the log dirs of the brokers")
    parser.add_argument("--broker-list", metavar="1,2,3", help="the brokers to query (default: every live broker)")
    parser.add_argument("--topic-list", metavar="t1,t2", help="the topics to report (default: every topic)")
    parser.set_defaults(run=lambda args, out: run_admin_command(args, out, run_log_dirs, LogDirsCommandError),
                        check=lambda args: None if args.describe else parser.error("--describe is required"))


def run_log_dirs(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    if args.broker_list:
        try:
            broker_ids = [int(b) for b in args.broker_list.split(",") if b.strip()]
        except ValueError as error:
            raise LogDirsCommandError(f"--broker-list must be broker ids like 1,2,3: {args.broker_list}") from error
    else:
        broker_ids = [node.node_id for node in admin.describe_cluster().nodes]
    topics = {t for t in (args.topic_list or "").split(",") if t}
    print("Querying brokers for log directories information", file=out)
    descriptions = admin.describe_log_dirs(broker_ids)
    print(f"Received log directory information from brokers {','.join(map(str, broker_ids))}", file=out)
    print(json.dumps(log_dirs_json(broker_ids, descriptions, topics), separators=(",", ":")), file=out)


def log_dirs_json(broker_ids: Sequence[int], descriptions: Mapping[int, Mapping[str, LogDirDescription]],
                  topics: set[str]) -> dict[str, Any]:
    """Kafka's log-dirs JSON; only the partitions of `topics` unless it is empty."""
    return {"version": 1, "brokers": [
        {"broker": broker_id, "logDirs": [
            {"logDir": log_dir,
             "error": None if description.error is None else description.error.error_name,
             "partitions": [{"partition": f"{tp.topic}-{tp.partition}", "size": info.size,
                             "offsetLag": info.offset_lag, "isFuture": info.is_future}
                            for tp, info in description.replica_infos.items() if not topics or tp.topic in topics]}
            for log_dir, description in descriptions[broker_id].items()]}
        for broker_id in broker_ids]}
