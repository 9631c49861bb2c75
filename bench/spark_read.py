"""Benchmark: Spark (local[2]) reading a topic through the `odradek` source, beside Spark's own Kafka
connector reading it through the broker's Kafka listener and Spark reading the same records from a
local Parquet file, and the streaming source's throughput.

Starts its own cluster (`LocalCluster` with free ports in a temp dir: ZooKeeper, one controller, one
broker, one coordinator, one uvicorn gateway), writes `--records` records of `--record-size` bytes
(our Producer, `--compression` lz4, null keys) over `--partitions` partitions, served by a
gateway of `--gateway-workers` worker processes, and has Spark write them once to a
local Parquet file (the same rows and columns). After `--warmup-rounds` untimed rounds of each (the
JVM's JIT, the Python workers and the gateway warmed alike), for `--rounds` rounds, in an order that
alternates, it times:

- odradek: `spark.read.format("odradek")...load()` of the whole topic, every column materialized
  (`write.format("noop")`);
- kafka: `spark.read.format("kafka")` (Spark's own connector, spark-sql-kafka-0-10, its jars from
  `bench.kafka_peer.fetch_spark_kafka_jars`) through the broker's Kafka listener, the same; left
  out, with a line saying why, when its jars cannot be fetched;
- parquet: `spark.read.parquet(file)`, the same;
- stream: `spark.readStream.format("odradek")` from earliest with `trigger(availableNow=True)` into
  the noop sink, in micro-batches of `--max-offsets-per-trigger`.

Prints seconds and records/s of each per round with that round's odradek/parquet, kafka/parquet and
odradek/kafka time ratios, then over all rounds the means and the medians of the per-round ratios;
odradek/parquet is held against the target (<= 3x the Parquet time): each ratio compares two reads
of the same round, and the median keeps one round disturbed by other work on the machine from
deciding.

    python bench/spark_read.py [--records 1000000] [--record-size 100] [--partitions 4] [--rounds 5]
                               [--warmup-rounds 2] [--compression lz4] [--gateway-workers 1]
                               [--option NAME=VALUE ...] [--spark-conf NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.kafka_peer import (  # noqa: E402
    KafkaJarsUnavailable,
    fetch_spark_kafka_jars,
    spark_connector_version,
    spark_kafka_jar_paths,
)
from odradek.spark import register  # noqa: E402
from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.clients.spark.session import local_session  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402

TOPIC = "spark-bench"
TIME_RATIO_TARGET = 3.0


def produce(bootstrap: str, args) -> None:
    pool = [random.randbytes(args.record_size) for _ in range(1024)]
    with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=5, batch_size=256 * 1024,
                  compression_type=args.compression) as producer:
        send = producer.send
        for index in range(args.records):
            send(TOPIC, pool[index & 1023], partition=index % args.partitions)
        producer.flush()


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup-rounds", type=int, default=2)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=250_000)
    parser.add_argument("--compression", default="lz4", help="the producer's compression.type")
    parser.add_argument("--gateway-workers", type=int, default=1, help="the gateway's num.workers")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of the odradek batch read (repeatable)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="NAME=VALUE",
                        help="a Spark setting over local_session()'s (repeatable)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=1, controllers=1, coordinators=1, gateways=1,
                               free_ports=True, broker_config={"log.segment.bytes": 1 << 30},
                               gateway_config={"num.workers": args.gateway_workers})
        spark = None
        try:
            cluster.start()
            bootstrap = cluster.bootstrap_servers
            with Admin(bootstrap_servers=bootstrap) as admin:
                admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])
                admin.wait_for_topic(TOPIC, 60)
            started = time.perf_counter()
            produce(bootstrap, args)
            print(f"{args.records:,} records x {args.record_size} B ({args.compression}) in {args.partitions} "
                  f"partitions, {args.gateway_workers} gateway worker(s), written in "
                  f"{time.perf_counter() - started:.1f} s; Spark local[2], {args.rounds} rounds in alternating "
                  f"order, {os.cpu_count()} CPUs", flush=True)
            spark_conf = dict(setting.split("=", 1) for setting in args.spark_conf)
            try:
                connector_jars = fetch_spark_kafka_jars()
                spark_conf = {"spark.jars": ",".join(spark_kafka_jar_paths(connector_jars)), **spark_conf}
                print(f"Spark's Kafka connector {spark_connector_version(connector_jars)} against "
                      f"{cluster.kafka_bootstrap_servers}", flush=True)
            except KafkaJarsUnavailable as exc:
                connector_jars = None
                print(f"Spark's Kafka connector left out: {exc}", flush=True)
            spark = local_session("odradek-bench", conf={"spark.driver.memory": "2g", **spark_conf})
            register(spark)
            gateway = cluster.gateway_url()
            parquet = str(Path(tmp) / "records.parquet")

            read_options = dict(option.split("=", 1) for option in args.option)

            def odradek_df():
                return (spark.read.format("odradek").option("gateway", gateway).option("subscribe", TOPIC)
                        .options(**read_options).load())

            def kafka_df():
                return (spark.read.format("kafka").option("kafka.bootstrap.servers", cluster.kafka_bootstrap_servers)
                        .option("subscribe", TOPIC).load())

            odradek_df().write.parquet(parquet)
            assert spark.read.parquet(parquet).count() == args.records
            if connector_jars is not None:
                assert kafka_df().count() == args.records
            checkpoints = iter(range(1_000_000))

            def stream() -> None:
                query = (spark.readStream.format("odradek").option("gateway", gateway).option("subscribe", TOPIC)
                         .option("startingOffsets", "earliest")
                         .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger).load()
                         .writeStream.format("noop")
                         .option("checkpointLocation", str(Path(tmp) / f"checkpoint-{next(checkpoints)}"))
                         .trigger(availableNow=True).start())
                query.awaitTermination()
                read = sum(progress["numInputRows"] for progress in query.recentProgress)
                assert read == args.records, read

            actions = {"odradek": lambda: odradek_df().write.format("noop").mode("overwrite").save(),
                       "parquet": lambda: spark.read.parquet(parquet).write.format("noop").mode("overwrite").save(),
                       "stream": stream}
            if connector_jars is not None:
                actions["kafka"] = lambda: kafka_df().write.format("noop").mode("overwrite").save()
            for _ in range(args.warmup_rounds):  # the JVM, the Python workers and the gateway warmed up alike
                for action in actions.values():
                    action()
            seconds: dict[str, list[float]] = {name: [] for name in actions}
            for round_index in range(args.rounds):
                order = list(actions) if round_index % 2 == 0 else list(reversed(actions))
                for name in order:
                    seconds[name].append(timed(actions[name]))
                report(f"round {round_index + 1}", {name: values[-1] for name, values in seconds.items()}, args)
            summarize(seconds, args)
        finally:
            if spark is not None:
                spark.stop()
            cluster.stop()


def rate(args, seconds: float) -> str:
    return f"{seconds:.2f} s ({args.records / seconds:,.0f} records/s)"


def report(label: str, seconds: dict[str, float], args) -> None:
    line = (f"  {label}: odradek batch {rate(args, seconds['odradek'])}, parquet {rate(args, seconds['parquet'])}, "
            f"odradek/parquet time {seconds['odradek'] / seconds['parquet']:.2f}x")
    if "kafka" in seconds:
        line += (f"; Spark's kafka connector {rate(args, seconds['kafka'])}, kafka/parquet time "
                 f"{seconds['kafka'] / seconds['parquet']:.2f}x, odradek/kafka time "
                 f"{seconds['odradek'] / seconds['kafka']:.2f}x")
    print(f"{line}; streaming {args.records / seconds['stream']:,.0f} records/s ({seconds['stream']:.2f} s)",
          flush=True)


def median_ratio(seconds: dict[str, list[float]], over: str, under: str) -> tuple[float, list[float]]:
    ratios = [a / b for a, b in zip(seconds[over], seconds[under], strict=True)]
    return statistics.median(ratios), ratios


def summarize(seconds: dict[str, list[float]], args) -> None:
    report("mean of all rounds", {name: statistics.mean(values) for name, values in seconds.items()}, args)
    ratio, ratios = median_ratio(seconds, "odradek", "parquet")
    verdict = "meets" if ratio <= TIME_RATIO_TARGET else "MISSES"
    print(f"  median odradek/parquet time ratio of the {args.rounds} rounds: {ratio:.2f}x ({verdict} <= "
          f"{TIME_RATIO_TARGET}x); per round: {', '.join(f'{value:.2f}x' for value in ratios)}", flush=True)
    if "kafka" in seconds:
        for over, under in (("kafka", "parquet"), ("odradek", "kafka")):
            ratio, ratios = median_ratio(seconds, over, under)
            print(f"  median {over}/{under} time ratio of the {args.rounds} rounds: {ratio:.2f}x; per round: "
                  f"{', '.join(f'{value:.2f}x' for value in ratios)}", flush=True)


if __name__ == "__main__":
    main()
