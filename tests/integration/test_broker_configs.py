"""Dynamic broker configs on a running cluster (two brokers, one controller): `log.retention.ms` set
as the cluster-wide default and per broker takes effect on running brokers without a restart —
their Kafka listeners describe the new value and source, and old records go at once from topics
without an override and stay on the broker whose own value is longer and in a topic with an
override; a static key is refused by name; deleting the dynamic keys brings the static value back;
a topic's changed override reaches the running broker too; a restarted broker starts with the
dynamic configs.
`odradek configs --entity-type brokers` and confluent-kafka's AdminClient (describe_configs,
incremental_alter_configs of BROKER resources over the Kafka listener) do the work."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import TEST_BROKER_CONFIG, create_topic, module_cluster, produce_values

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import admin as confluent_admin  # noqa: E402

STATIC_RETENTION_MS = "7200000"  # two hours: an hour-old record stays
DEADLINE_S = 20.0
Source = confluent_admin.ConfigSource


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    broker_config = {**TEST_BROKER_CONFIG, "log.retention.ms": STATIC_RETENTION_MS,
                     "log.retention.check.interval.ms": 200, "log.initial.task.delay.ms": 100}
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "broker-configs", brokers=2,
                        controllers=1, broker_config=broker_config) as local:
        yield local


@pytest.fixture(scope="module")
def kafka_admin(cluster: LocalCluster):
    return confluent_admin.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})


def run(argv: list[str], capsys) -> tuple[int, list[str]]:
    code = cli.main(argv)
    return code, capsys.readouterr().out.splitlines()


def broker_retention(kafka_admin, broker: str) -> tuple[str, object]:
    """(value, source) of `log.retention.ms` as the broker describes it (confluent-kafka keeps
    synonyms by name, so only one of a key's synonyms comes through; they are checked elsewhere)."""
    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.BROKER, broker)
    entry = kafka_admin.describe_configs([resource], request_timeout=DEADLINE_S)[resource].result(
        timeout=DEADLINE_S)["log.retention.ms"]
    return entry.value, Source(entry.source)


def wait_for_retention(kafka_admin, broker: str, value: str, source) -> None:
    wait_until(lambda: broker_retention(kafka_admin, broker) == (value, source), DEADLINE_S, 0.1,
               lambda: f"broker {broker} to describe log.retention.ms={value} ({source.name}): "
                       f"{broker_retention(kafka_admin, broker)}")


def earliest(admin: Admin, topic: str) -> int:
    return admin.list_offsets({TopicPartition(topic, 0): "earliest"})[TopicPartition(topic, 0)].offset


def old_records(writer: LowLevelClient, topic: str) -> None:
    hour_ago_ms = int(time.time() * 1000) - 3_600_000
    produce_values(writer, topic, 0, [b"a", b"b", b"c"], timestamps=hour_ago_ms)


def test_dynamic_retention_by_default_and_per_broker_takes_effect_live(cluster: LocalCluster, admin: Admin,
                                                                       writer: LowLevelClient, kafka_admin,
                                                                       capsys):
    on_1 = create_topic(admin, "on-broker-1", assignment={0: [1]})
    on_2 = create_topic(admin, "on-broker-2", assignment={0: [2]})
    kept = create_topic(admin, "overridden", assignment={0: [1]}, configs={"retention.ms": STATIC_RETENTION_MS})
    for topic in (on_1, on_2, kept):
        old_records(writer, topic)
    assert [earliest(admin, t) for t in (on_1, on_2, kept)] == [0, 0, 0]
    assert broker_retention(kafka_admin, "1") == (STATIC_RETENTION_MS, Source.STATIC_BROKER_CONFIG)

    configs = ["configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "brokers"]
    assert run(configs + ["--entity-name", "2", "--alter", "--add-config", f"log.retention.ms={STATIC_RETENTION_MS}"],
               capsys) == (0, ["Completed updating config for broker 2."])
    assert run(configs + ["--entity-default", "--alter", "--add-config", "log.retention.ms=60000"], capsys) == (
        0, ["Completed updating default config for brokers in the cluster."])

    wait_for_retention(kafka_admin, "1", "60000", Source.DYNAMIC_DEFAULT_BROKER_CONFIG)
    wait_until(lambda: earliest(admin, on_1) == 3, DEADLINE_S, 0.1,
               "broker 1 to apply the 1-minute retention")
    wait_for_retention(kafka_admin, "2", STATIC_RETENTION_MS, Source.DYNAMIC_BROKER_CONFIG)
    assert earliest(admin, on_2) == 0 and earliest(admin, kept) == 0  # per broker and per topic win

    code, lines = run(configs + ["--entity-name", "2", "--describe"], capsys)
    assert code == 0 and lines == [
        "Dynamic configs for broker 2 are:",
        f"  log.retention.ms={STATIC_RETENTION_MS} sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:"
        f"log.retention.ms={STATIC_RETENTION_MS}, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000}}"]
    assert run(configs + ["--entity-default", "--describe"], capsys) == (0, [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=60000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000}"])

    # broker 2's own value deleted over the Kafka listener: the cluster default applies there too
    delete = confluent_admin.ConfigResource(confluent_admin.ResourceType.BROKER, "2", incremental_configs=[
        confluent_admin.ConfigEntry("log.retention.ms", None,
                                    incremental_operation=confluent_admin.AlterConfigOpType.DELETE)])
    kafka_admin.incremental_alter_configs([delete])[delete].result(timeout=DEADLINE_S)
    wait_for_retention(kafka_admin, "2", "60000", Source.DYNAMIC_DEFAULT_BROKER_CONFIG)
    wait_until(lambda: earliest(admin, on_2) == 3, DEADLINE_S, 0.1, "broker 2 to apply the 1-minute retention")

    # the default deleted: the static value returns
    assert run(configs + ["--entity-default", "--alter", "--delete-config", "log.retention.ms"], capsys) == (
        0, ["Completed updating default config for brokers in the cluster."])
    for broker in ("1", "2"):
        wait_for_retention(kafka_admin, broker, STATIC_RETENTION_MS, Source.STATIC_BROKER_CONFIG)
    assert run(configs + ["--entity-name", "1", "--describe"], capsys) == (0, ["Dynamic configs for broker 1 are:"])

    # a topic's own override, changed, reaches the running broker the same way
    assert earliest(admin, kept) == 0
    admin.incremental_alter_configs(kept, {"retention.ms": "60000"})
    wait_until(lambda: earliest(admin, kept) == 3, DEADLINE_S, 0.1, "broker 1 to apply the topic's new retention")


def test_static_keys_are_refused_by_name(cluster: LocalCluster, kafka_admin, capsys):
    configs = ["configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "brokers"]
    code, lines = run(configs + ["--entity-name", "1", "--alter", "--add-config",
                                 "num.partitions=3,log.retention.ms=1000"], capsys)
    assert code == 1 and lines == ["Error: Cannot update these configs dynamically: num.partitions (they are read "
                                   "from the broker's properties at start)"]
    change = confluent_admin.ConfigResource(confluent_admin.ResourceType.BROKER, "1", incremental_configs=[
        confluent_admin.ConfigEntry("log.dirs", "/elsewhere",
                                    incremental_operation=confluent_admin.AlterConfigOpType.SET)])
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        kafka_admin.incremental_alter_configs([change])[change].result(timeout=DEADLINE_S)
    assert refused.value.args[0].name() == "INVALID_REQUEST" and "log.dirs" in refused.value.args[0].str()
    assert run(configs + ["--entity-name", "1", "--alter", "--delete-config", "log.retention.ms"], capsys) == (
        1, ["Error: Invalid config(s): log.retention.ms"])
    assert broker_retention(kafka_admin, "1") == (STATIC_RETENTION_MS, Source.STATIC_BROKER_CONFIG)


def test_a_restarted_broker_starts_with_the_dynamic_configs(cluster: LocalCluster, kafka_admin, capsys):
    configs = ["configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "brokers",
               "--entity-default", "--alter"]
    assert run(configs + ["--add-config", "log.segment.bytes=2097152"], capsys)[0] == 0
    cluster.restart_service(cluster.broker_name(2), timeout_s=DEADLINE_S)
    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.BROKER, "2")

    def segment_bytes():
        try:
            entry = kafka_admin.describe_configs([resource], request_timeout=5)[resource].result(
                timeout=5)["log.segment.bytes"]
        except confluent_kafka.KafkaException:
            return None  # the broker is still coming back
        return entry.value, Source(entry.source)

    wait_until(lambda: segment_bytes() == ("2097152", Source.DYNAMIC_DEFAULT_BROKER_CONFIG), DEADLINE_S, 0.2,
               lambda: f"the restarted broker 2 to use the default log.segment.bytes: {segment_bytes()}")
    assert run(configs + ["--delete-config", "log.segment.bytes"], capsys)[0] == 0
