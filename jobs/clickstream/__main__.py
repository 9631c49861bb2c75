"""`python -m jobs.clickstream {generate,stream,backfill,run}`: the clickstream pipeline's steps,
each against a gateway (`--gateway`, default http://127.0.0.1:8080, the gateway of `make up`).
`--connector kafka` runs the Spark jobs on Spark's own Kafka connector against the brokers' Kafka
listeners (`--bootstrap-servers`, default those of `make up`) instead of the `odradek` source; its
jars are `--jars`, or fetched by the checkout's bench/kafka_peer.py. The Spark jobs run in
`local[2]`, or on a Spark standalone cluster with `--master spark://host:port` (`odradek dev spark
up` starts one); there `--dir` must be a directory every worker sees at the same path.

    generate   send generated traffic to a topic; prints what was sent (`--records-file` keeps it)
    stream     the Structured Streaming job (to the end of the topic; `--processing-time` runs on
               until SIGINT or SIGTERM stop its queries; a restart resumes from the checkpoints)
    backfill   the batch job, over its output directory
    run        all of it on new topics, then the comparison table; exit code 1 when outputs differ
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from jobs.clickstream import backfill, events, generator, pipeline, streaming
from jobs.clickstream.connector import DEFAULT_BOOTSTRAP_SERVERS, NAMES, Connector, kafka_connector_jars
from services.clients.spark.gateway import GatewayClient, gateway_urls

DEFAULT_BASE_DIR = Path("var/jobs/clickstream")
DEFAULT_TOPIC = "clickstream"
DEFAULT_EVENTS = 2000
DEFAULT_MASTER = "local[2]"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.clickstream", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--gateway", default=pipeline.DEFAULT_GATEWAY, help="gateway URL(s), comma separated")
        return sub

    def master_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--master", default=DEFAULT_MASTER,
                         help="Spark's master: local[N] or a standalone cluster's spark://host:port "
                              "(`odradek dev spark up` prints one; default %(default)s)")

    def connector_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--connector", choices=NAMES, default=NAMES[0],
                         help="the Spark jobs' source and sink: odradek (through the gateway, the default) or "
                              "kafka (Spark's own Kafka connector, through the brokers' Kafka listeners)")
        sub.add_argument("--bootstrap-servers", default=DEFAULT_BOOTSTRAP_SERVERS,
                         help="the brokers' Kafka listeners, for --connector kafka (default %(default)s)")
        sub.add_argument("--jars", help="Spark's Kafka connector's jars, comma separated, for --connector kafka "
                                        "(default: fetched from Maven Central into ~/.cache/odradek)")

    def traffic_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--events", type=int, default=DEFAULT_EVENTS, help="records to send")
        sub.add_argument("--seed", type=int, default=16)
        sub.add_argument("--start", help="first event time (ISO-8601 UTC; default: the traffic ends about now)")
        sub.add_argument("--late-share", type=float, default=0.05)
        sub.add_argument("--malformed-share", type=float, default=0.05)

    generate = command("generate", "send generated page-view traffic to a topic")
    generate.add_argument("--topic", default=DEFAULT_TOPIC)
    generate.add_argument("--partitions", type=int, default=pipeline.DEFAULT_PARTITIONS,
                          help="partitions of the topic when it is created")
    generate.add_argument("--records-file", type=Path, help="write each sent record as a JSON line")
    traffic_options(generate)
    generate.set_defaults(run=run_generate)

    stream = command("stream", "run the Structured Streaming job")
    stream.add_argument("--topic", default=DEFAULT_TOPIC)
    stream.add_argument("--dead-letter-topic", help="default: <topic>-dead-letter")
    stream.add_argument("--partitions", type=int, default=pipeline.DEFAULT_PARTITIONS,
                        help="partitions of the dead-letter topic when it is created")
    stream.add_argument("--dir", type=Path, default=DEFAULT_BASE_DIR, help="base of the output and checkpoints")
    stream.add_argument("--processing-time", metavar="INTERVAL",
                        help="run on, one micro-batch per interval ('10 seconds'), instead of availableNow")
    connector_options(stream)
    master_option(stream)
    stream.set_defaults(run=run_stream)

    backfill_parser = command("backfill", "recompute the aggregates from the topic's beginning")
    backfill_parser.add_argument("--topic", default=DEFAULT_TOPIC)
    backfill_parser.add_argument("--dir", type=Path, default=DEFAULT_BASE_DIR)
    connector_options(backfill_parser)
    master_option(backfill_parser)
    backfill_parser.set_defaults(run=run_backfill)

    run = command("run", "create new topics, generate, stream, backfill and compare")
    run.add_argument("--topic", help="default: clickstream-<UTC time>, a new topic each run")
    run.add_argument("--dir", type=Path, default=DEFAULT_BASE_DIR, help="the run's directory is <dir>/<topic>")
    run.add_argument("--partitions", type=int, default=pipeline.DEFAULT_PARTITIONS)
    traffic_options(run)
    connector_options(run)
    master_option(run)
    run.set_defaults(run=run_all)
    return parser


def start_ms(args: argparse.Namespace) -> int:
    """`--start`, or the minute that makes the closing view's event time about now."""
    if args.start:
        parsed = events.parse_event_time(args.start)
        if parsed is None:
            raise SystemExit(f"--start must look like 2026-11-26T10:00:00.000Z, not {args.start!r}")
        return parsed
    # The traffic from a minute boundary is the same traffic shifted: the one from 0 says how long it lasts.
    from_zero = generator.generate_events(args.events, seed=args.seed, start_ms=0, late_share=args.late_share,
                                          malformed_share=args.malformed_share)
    length_ms = events.read_event(from_zero.records[-1].value).event_time_ms
    return events.window_start_ms(int(time.time() * 1000) - length_ms)


def progress(line: str) -> None:
    print(line, flush=True)


def session(name: str, args: argparse.Namespace):
    """A SparkSession on `--master` (local[2] by default) with the `odradek` format, and Spark's
    Kafka connector for `--connector kafka`."""
    from odradek.spark import register
    from services.clients.spark.session import job_session

    conf = {}
    if args.connector == "kafka":
        conf["spark.jars"] = args.jars or ",".join(kafka_connector_jars())
    spark = job_session(f"clickstream-{name}", master=args.master, conf=conf)
    register(spark)
    return spark


def connector_of(args: argparse.Namespace) -> Connector:
    return Connector.named(args.connector, gateway=args.gateway, bootstrap_servers=args.bootstrap_servers)


def run_generate(args: argparse.Namespace) -> int:
    sent = generator.generate_events(args.events, seed=args.seed, start_ms=start_ms(args),
                                     late_share=args.late_share, malformed_share=args.malformed_share)
    with GatewayClient(gateway_urls(args.gateway)) as client:
        generator.ensure_topic(client, args.topic, args.partitions)
        generator.send_records(client, args.topic, sent.records)
    print(f"sent {sent.summary()} to {args.topic}")
    for kind, count in sorted(Counter(record.malformed_kind for record in sent.malformed()).items()):
        print(f"  malformed, {kind}: {count}")
    if args.records_file:
        with args.records_file.open("w") as lines:
            for record in sent.records:
                key = None if record.key is None else base64.b64encode(record.key).decode()
                lines.write(json.dumps({"kind": record.kind, "malformed_kind": record.malformed_kind, "key": key,
                                        "value": base64.b64encode(record.value).decode()}) + "\n")
    return 0


def run_stream(args: argparse.Namespace) -> int:
    paths = pipeline.PipelinePaths(args.dir / args.topic)
    dead_letter_topic = args.dead_letter_topic or pipeline.dead_letter_topic_of(args.topic)
    with GatewayClient(gateway_urls(args.gateway)) as client:
        generator.ensure_topic(client, dead_letter_topic, args.partitions)
    spark = session("stream", args)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # in place of PySpark's SIGINT handler, which cancels jobs
        signal.signal(signum, lambda _signum, _frame: stop.set())
    streaming.run_streaming(spark, connector=connector_of(args), topic=args.topic,
                            dead_letter_topic=dead_letter_topic, output_dir=paths.streaming,
                            checkpoint_dir=paths.checkpoints,
                            processing_time=args.processing_time, out=progress, stop=stop)
    return 0


def run_backfill(args: argparse.Namespace) -> int:
    paths = pipeline.PipelinePaths(args.dir / args.topic)
    backfill.run_backfill(session("backfill", args), connector=connector_of(args), topic=args.topic,
                          output_dir=paths.backfill, out=progress)
    return 0


def run_all(args: argparse.Namespace) -> int:
    topic = args.topic or time.strftime("clickstream-%Y%m%d-%H%M%S", time.gmtime())
    agreed = pipeline.run_pipeline(session("run", args), gateway=args.gateway, topic=topic,
                                   base_dir=args.dir / topic, events_count=args.events, seed=args.seed,
                                   start_ms=start_ms(args),
                                   partitions=args.partitions, late_share=args.late_share,
                                   malformed_share=args.malformed_share, connector=connector_of(args),
                                   out=progress)
    return 0 if agreed else 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "dir", None) is not None:  # executors on a cluster resolve no path against ours
        args.dir = args.dir.absolute()
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
