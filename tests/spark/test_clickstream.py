"""The clickstream pipeline against a real cluster and gateway, with a local[2] SparkSession: ~2,000
generated records (late views, 5% malformed) posted through the gateway; the streaming job
(availableNow) writes exactly the independently computed aggregates, every window; the dead-letter
topic holds exactly the malformed records with their keys and reasons; the backfill writes the same
aggregates. Spark's parsing is also checked against the event rules on the records themselves. The
whole pipeline (`python -m jobs.clickstream run --connector kafka`) also runs on Spark's own Kafka
connector through the broker's Kafka listener, with the same outcome."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.clickstream import backfill, events, generator, pipeline, streaming, transform
from jobs.clickstream.__main__ import main as clickstream_main
from jobs.clickstream.connector import Connector
from jobs.clickstream.generator import GeneratedEvents
from services.clients.spark.gateway import GatewayClient, gateway_urls
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import gateway_module_cluster
from tests.spark.conftest import spark_kafka_jars

TOPIC = "clicks"
DEAD_LETTER_TOPIC = pipeline.dead_letter_topic_of(TOPIC)
START_MS = events.parse_event_time("2026-11-26T10:00:00.000Z")

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def generated() -> GeneratedEvents:
    return generator.generate_events(2000, seed=16, start_ms=START_MS, late_share=0.08, malformed_share=0.05)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "clickstream",
                                brokers=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def gateway(cluster: LocalCluster, generated: GeneratedEvents) -> str:
    """The gateway's URL, once the records are in the topic (two partitions, keyed by user)."""
    url = cluster.gateway_url()
    with GatewayClient(gateway_urls(url)) as client:
        for topic in (TOPIC, DEAD_LETTER_TOPIC):
            assert generator.ensure_topic(client, topic, partitions=2)
        assert not generator.ensure_topic(client, TOPIC, partitions=2)
        generator.send_records(client, TOPIC, generated.records)
    return url


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> pipeline.PipelinePaths:
    return pipeline.PipelinePaths(Path(tmp_path_factory.mktemp("clickstream")))


@pytest.fixture(scope="module")
def streamed(spark, gateway: str, paths: pipeline.PipelinePaths) -> tuple[dict[str, streaming.QueryProgress],
                                                                          list[str]]:
    lines: list[str] = []
    totals = streaming.run_streaming(spark, connector=Connector.odradek(gateway), topic=TOPIC,
                                     dead_letter_topic=DEAD_LETTER_TOPIC, output_dir=paths.streaming,
                                     checkpoint_dir=paths.checkpoints, out=lines.append)
    return totals, lines


def test_spark_applies_the_event_rules_to_every_record(spark, generated: GeneratedEvents):
    records = spark.createDataFrame([(r.key, r.value) for r in generated.records], "key binary, value binary")
    parsed = transform.parse_events(records)
    rejected = parsed.where("reason IS NOT NULL").select("value", "reason").collect()
    assert sorted((bytes(row.value), row.reason) for row in rejected) == \
        sorted(events.dead_letter_reasons(generated.values()))
    views = transform.page_views(parsed)
    batch = transform.closed_windows(transform.aggregate_page_views(views), views)
    assert pipeline.collect_aggregates(batch) == events.expected_aggregates(generated.values())


def test_the_streaming_job_writes_every_window_exactly(spark, generated: GeneratedEvents, streamed,
                                                        paths: pipeline.PipelinePaths):
    expected = events.expected_aggregates(generated.values())
    assert len(expected) > 200 and sum(row.page_views for row in expected) > 1800
    assert pipeline.read_aggregates(spark, paths.streaming) == expected
    dates = {p.name for p in paths.streaming.iterdir() if p.name.startswith("date=")}
    assert dates == {"date=2026-11-26"}
    totals, lines = streamed
    assert totals[streaming.AGGREGATES].records_read == len(generated.records)
    assert totals[streaming.DEAD_LETTERS].records_read == len(generated.records)
    assert any(line.startswith("[aggregates] batch 0: ") for line in lines)


def test_the_dead_letter_topic_holds_exactly_the_malformed_records(spark, generated: GeneratedEvents, gateway: str,
                                                                    streamed):
    rows = (spark.read.format("odradek").option("gateway", gateway).option("subscribe", DEAD_LETTER_TOPIC)
            .option("includeHeaders", "true").load().select("key", "value", "headers").collect())
    got = Counter((row.key and bytes(row.key), bytes(row.value),
                   tuple((h.key, bytes(h.value).decode()) for h in row.headers or ())) for row in rows)
    reasons = dict(events.dead_letter_reasons(generated.values()))
    want = Counter((r.key, r.value, ((events.DEAD_LETTER_REASON_HEADER, reasons[r.value]),))
                   for r in generated.malformed())
    assert len(want) == len(generated.malformed()) == 100
    assert got == want


def test_the_backfill_writes_the_same_aggregates(spark, generated: GeneratedEvents, gateway: str, streamed,
                                                 paths: pipeline.PipelinePaths):
    lines: list[str] = []
    windows = backfill.run_backfill(spark, connector=Connector.odradek(gateway), topic=TOPIC,
                                    output_dir=paths.backfill, out=lines.append)
    expected = events.expected_aggregates(generated.values())
    assert windows == len(expected)
    backfilled = pipeline.read_aggregates(spark, paths.backfill)
    assert backfilled == expected == pipeline.read_aggregates(spark, paths.streaming)
    assert lines == [f"[backfill] {len(generated.records)} records read, {windows} windows written to {paths.backfill}"]


@pytest.mark.skipif(not spark_kafka_jars(), reason="Spark's Kafka connector cannot be fetched here")
def test_the_pipeline_runs_on_sparks_kafka_connector(spark, cluster: LocalCluster, gateway: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]):
    topic = "clicks-on-kafka-connector"
    code = clickstream_main(["run", "--connector", "kafka", "--bootstrap-servers", cluster.kafka_bootstrap_servers,
                             "--jars", ",".join(spark_kafka_jars()), "--gateway", gateway, "--topic", topic,
                             "--dir", str(tmp_path), "--events", "600", "--seed", "29"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "dead-letter topic:  30 records (30 malformed sent)" in printed
    assert "streaming == backfill:  yes, every window" in printed
    assert "streaming == expected:  yes, every window" in printed
    assert "[backfill] 600 records read" in printed
