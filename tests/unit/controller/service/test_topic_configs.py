"""TopicConfigAdmin over an in-test stand-in for OdradekZkClient's topic config operations."""

from __future__ import annotations

from services.common.errors import Errors
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.controller.topic_configs import SOURCE_DEFAULT, SOURCE_DYNAMIC_TOPIC, TopicConfigAdmin

Alterable = pb.AlterConfigsRequest.AlterableConfig
Incremental = pb.IncrementalAlterConfigsRequest.AlterableConfig


class TopicConfigZk:
    def __init__(self) -> None:
        self.configs = {"t": {"retention.ms": "1000"}}
        self.writes: list[tuple[str, dict, bool]] = []

    def get_topic_assignment(self, topic):
        return object() if topic in self.configs else None

    def get_topic_config(self, topic):
        return dict(self.configs[topic])

    def set_topic_config(self, topic, config, *, notify=True):
        self.writes.append((topic, dict(config), notify))
        self.configs[topic] = dict(config)


def describe(admin, name="t", keys=(), resource_type=2, synonyms=False):
    resource = pb.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=list(keys)
    )
    (result,) = admin.describe(
        pb.DescribeConfigsRequest(resources=[resource], include_synonyms=synonyms)
    ).results
    return result


def test_describe_shows_overrides_and_defaults_with_their_sources():
    admin = TopicConfigAdmin(TopicConfigZk())
    result = describe(admin, keys=["retention.ms", "cleanup.policy", "no.such.key"], synonyms=True)
    entries = {c.name: c for c in result.configs}
    assert set(entries) == {"retention.ms", "cleanup.policy"}
    assert (entries["retention.ms"].value, entries["retention.ms"].config_source) == (
        "1000",
        SOURCE_DYNAMIC_TOPIC,
    )
    assert [s.source for s in entries["retention.ms"].synonyms] == [SOURCE_DYNAMIC_TOPIC, SOURCE_DEFAULT]
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].config_source) == (
        "delete",
        SOURCE_DEFAULT,
    )
    assert entries["cleanup.policy"].config_type == 7
    assert len(describe(admin).configs) > 20


def test_describe_errors_per_resource():
    admin = TopicConfigAdmin(TopicConfigZk())
    assert describe(admin, name="missing").error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert describe(admin, resource_type=8, name="1").error_code == Errors.INVALID_REQUEST


def test_alter_replaces_every_override_and_notifies():
    zk = TopicConfigZk()
    admin = TopicConfigAdmin(zk)
    resource = pb.AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name="t", configs=[Alterable(name="cleanup.policy", value="compact")]
    )
    (result,) = admin.alter(pb.AlterConfigsRequest(resources=[resource])).responses
    assert result.error_code == 0
    assert zk.writes == [("t", {"cleanup.policy": "compact"}, True)]


def test_alter_checks_values_and_validate_only_writes_nothing():
    zk = TopicConfigZk()
    admin = TopicConfigAdmin(zk)
    bad = pb.AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name="t", configs=[Alterable(name="retention.ms", value="soon")]
    )
    good = pb.AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name="t", configs=[Alterable(name="retention.ms", value="5")]
    )
    results = admin.alter(pb.AlterConfigsRequest(resources=[bad, good], validate_only=True)).responses
    assert [r.error_code for r in results] == [Errors.INVALID_CONFIG, 0]
    assert zk.writes == []


def test_incremental_alter_sets_deletes_appends_and_subtracts():
    zk = TopicConfigZk()
    admin = TopicConfigAdmin(zk)

    def alter(*entries):
        resource = pb.IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name="t", configs=list(entries)
        )
        (result,) = admin.incremental_alter(pb.IncrementalAlterConfigsRequest(resources=[resource])).responses
        return result.error_code

    assert (
        alter(
            Incremental(name="segment.ms", config_operation=0, value="100"),
            Incremental(name="retention.ms", config_operation=1),
        )
        == 0
    )
    assert zk.configs["t"] == {"segment.ms": "100"}
    assert alter(Incremental(name="cleanup.policy", config_operation=2, value="compact")) == 0
    assert zk.configs["t"]["cleanup.policy"] == "delete,compact"
    assert alter(Incremental(name="cleanup.policy", config_operation=3, value="delete")) == 0
    assert zk.configs["t"]["cleanup.policy"] == "compact"
    assert alter(Incremental(name="segment.ms", config_operation=2, value="1")) == Errors.INVALID_REQUEST
    assert alter(
        Incremental(name="segment.ms", config_operation=0, value="1"),
        Incremental(name="segment.ms", config_operation=1),
    ) == Errors.INVALID_REQUEST
