"""Broker config resources on the controller: per-broker and cluster-default dynamic configs in
`/config/brokers/...` with a change notification, static keys refused by name, the dynamic layers
described with their sources (over a fake kazoo and the real `OdradekZkClient`)."""

from __future__ import annotations

import json

from services.common.dynamic_broker_configs import (
    DYNAMIC_BROKER_CONFIG_SOURCE,
    DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE,
)
from services.common.errors import Errors
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.zk import OdradekZkClient
from services.controller.topic_configs import TopicConfigAdmin
from tests.unit.zk.fake_kazoo import FakeKazoo

Incremental = pb.IncrementalAlterConfigsRequest.AlterableConfig
Alterable = pb.AlterConfigsRequest.AlterableConfig
SET, DELETE, APPEND = 0, 1, 2


def admin_and_zk() -> tuple[TopicConfigAdmin, FakeKazoo]:
    kazoo = FakeKazoo()
    return TopicConfigAdmin(OdradekZkClient(kazoo)), kazoo


def incremental(admin, name, *entries, validate_only=False):
    resource = pb.IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=4, resource_name=name, configs=[Incremental(name=k, config_operation=op, value=v)
                                                      if v is not None else Incremental(name=k, config_operation=op)
                                                      for k, op, v in entries])
    (result,) = admin.incremental_alter(pb.IncrementalAlterConfigsRequest(
        resources=[resource], validate_only=validate_only)).responses
    return result


def describe(admin, name):
    resource = pb.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name=name)
    (result,) = admin.describe(pb.DescribeConfigsRequest(resources=[resource], include_synonyms=True)).results
    return result


def stored(kazoo: FakeKazoo, path: str) -> dict:
    return json.loads(kazoo.get(path)[0])


def notifications(kazoo: FakeKazoo) -> list[str]:
    return [stored(kazoo, f"/config/changes/{n}")["entity_path"] for n in sorted(kazoo.get_children("/config/changes"))]


def test_per_broker_and_default_configs_are_stored_and_announced():
    admin, kazoo = admin_and_zk()
    assert incremental(admin, "", ("log.retention.ms", SET, "60000")).error_code == Errors.NONE
    assert incremental(admin, "1", ("log.retention.ms", SET, "30000"),
                       ("log.cleanup.policy", SET, "delete")).error_code == Errors.NONE
    assert incremental(admin, "1", ("log.cleanup.policy", APPEND, "compact")).error_code == Errors.NONE
    assert stored(kazoo, "/config/brokers/<default>") == {"version": 1, "config": {"log.retention.ms": "60000"}}
    assert stored(kazoo, "/config/brokers/1")["config"] == {"log.retention.ms": "30000",
                                                             "log.cleanup.policy": "delete,compact"}
    assert notifications(kazoo) == ["brokers/<default>", "brokers/1", "brokers/1"]
    assert incremental(admin, "1", ("log.retention.ms", DELETE, None)).error_code == Errors.NONE
    assert stored(kazoo, "/config/brokers/1")["config"] == {"log.cleanup.policy": "delete,compact"}


def test_static_keys_bad_values_and_bad_names_are_refused_and_nothing_is_written():
    admin, kazoo = admin_and_zk()
    refused = incremental(admin, "1", ("num.partitions", SET, "3"), ("broker.id", SET, "7"),
                          ("log.retention.ms", SET, "1"))
    assert refused.error_code == Errors.INVALID_REQUEST
    assert "broker.id, num.partitions" in refused.error_message
    assert incremental(admin, "1", ("log.retention.ms", SET, "soon")).error_code == Errors.INVALID_CONFIG
    assert incremental(admin, "one", ("log.retention.ms", SET, "1")).error_code == Errors.INVALID_REQUEST
    assert incremental(admin, "1", ("log.retention.ms", APPEND, "1")).error_code == Errors.INVALID_REQUEST
    assert incremental(admin, "1", ("log.retention.ms", SET, "5"), validate_only=True).error_code == Errors.NONE
    assert kazoo.exists("/config/brokers/1") is None


def test_alter_replaces_a_brokers_whole_set():
    admin, kazoo = admin_and_zk()
    incremental(admin, "2", ("log.retention.ms", SET, "1000"), ("log.segment.bytes", SET, "1048576"))
    resource = pb.AlterConfigsRequest.AlterConfigsResource(
        resource_type=4, resource_name="2", configs=[Alterable(name="log.retention.bytes", value="10")])
    (result,) = admin.alter(pb.AlterConfigsRequest(resources=[resource])).responses
    assert result.error_code == Errors.NONE
    assert stored(kazoo, "/config/brokers/2")["config"] == {"log.retention.bytes": "10"}


def test_describe_shows_the_dynamic_layers_with_their_sources():
    admin, _ = admin_and_zk()
    incremental(admin, "", ("log.retention.ms", SET, "60000"), ("log.segment.bytes", SET, "1048576"))
    incremental(admin, "1", ("log.retention.ms", SET, "30000"))
    own = {c.name: c for c in describe(admin, "1").configs}
    assert (own["log.retention.ms"].value, own["log.retention.ms"].config_source) == (
        "30000", DYNAMIC_BROKER_CONFIG_SOURCE)
    assert [(s.value, s.source) for s in own["log.retention.ms"].synonyms] == [
        ("30000", DYNAMIC_BROKER_CONFIG_SOURCE), ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE)]
    assert (own["log.segment.bytes"].value, own["log.segment.bytes"].config_source) == (
        "1048576", DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE)
    defaults = {c.name: (c.value, c.config_source) for c in describe(admin, "").configs}
    assert defaults == {"log.retention.ms": ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE),
                        "log.segment.bytes": ("1048576", DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE)}
    assert describe(admin, "x").error_code == Errors.INVALID_REQUEST
