"""`TopicConfigAdmin`: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics (Kafka's
ZK-mode AdminManager), over `/config/topics/<t>` through `OdradekZkClient`.

Describe lists every topic-level key (or those asked for): an override with source
DYNAMIC_TOPIC_CONFIG (1), else Kafka's default with source DEFAULT_CONFIG (5). Alter replaces
the topic's whole set of overrides; incremental alter sets, deletes, appends to or subtracts from
single keys (append and subtract only for list keys). Values are checked as at topic creation
(`state.topics.validate_topic_configs`). A write stores the overrides and a change notification
in one transaction; the controller and the brokers pick the change up from `/config/changes`.
`validate_only` checks without writing. Broker resources (type 4) go to `BrokerConfigAdmin`;
other types are answered INVALID_REQUEST. Runs on RPC threads: it touches ZooKeeper only, never the context.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.config import CONFIG_TYPE_CODES, ConfigType
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.topic_names import validate_topic_name
from services.common.zk import OdradekZkClient
from services.controller.broker_configs import (
    BROKER_RESOURCE,
    BrokerConfigAdmin,
    apply_broker_operation,
    apply_config_operation,
)
from services.controller.controller_protos import kafka_error
from services.controller.state.topics import TOPIC_CONFIGS, validate_topic_configs

TOPIC_RESOURCE = 2
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DEFAULT = 5
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
LONG_MAX = str(2**63 - 1)
# Kafka 2.8's defaults of the topic-level configs, and of Odradek's max.message.decompressed.bytes.
KAFKA_TOPIC_DEFAULTS = {
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "max.message.bytes": "1048588",
    "max.message.decompressed.bytes": "67108864",
    "index.interval.bytes": "4096",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": LONG_MAX,
    "file.delete.delay.ms": "60000",
    "min.cleanable.dirty.ratio": "0.5",
    "cleanup.policy": "delete",
    "unclean.leader.election.enable": "false",
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "preallocate": "false",
    "message.format.version": "2.8-IV1",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.difference.max.ms": LONG_MAX,
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "message.downconversion.enable": "true",
}

Entry = Any  # a (name, operation, value) request entry


class TopicConfigAdmin:
    def __init__(self, zk: OdradekZkClient, defaults: Mapping[str, str] | None = None) -> None:
        self._zk = zk
        self._defaults = {**KAFKA_TOPIC_DEFAULTS, **(defaults or {})}
        self._brokers = BrokerConfigAdmin(zk)

    # --- describe ----------------------------------------------------------------------------

    def describe(self, request: pb.DescribeConfigsRequest) -> pb.DescribeConfigsResponse:
        response = pb.DescribeConfigsResponse()
        for resource in request.resources:
            result = response.results.add(
                resource_type=resource.resource_type, resource_name=resource.resource_name
            )
            if resource.resource_type == BROKER_RESOURCE:
                self._brokers.describe(resource, result, request.include_synonyms)
                continue
            try:
                overrides = self._existing_topic_config(resource.resource_type, resource.resource_name)
            except Exception as e:
                error = kafka_error(e)
                result.error_code, result.error_message = error.code, str(error.args[0])
                continue
            keys = list(resource.configuration_keys) or sorted(TOPIC_CONFIGS)
            for key in keys:
                if key in TOPIC_CONFIGS:
                    self._describe_key(result, key, overrides, request.include_synonyms)
        return response

    def _describe_key(self, result: Any, key: str, overrides: Mapping[str, str], synonyms: bool) -> None:
        default = self._defaults.get(key)
        overridden = key in overrides
        entry = result.configs.add(
            name=key,
            read_only=False,
            config_source=SOURCE_DYNAMIC_TOPIC if overridden else SOURCE_DEFAULT,
            is_sensitive=False,
            config_type=CONFIG_TYPE_CODES.get(TOPIC_CONFIGS[key][0], 0),
        )
        value = overrides[key] if overridden else default
        if value is not None:
            entry.value = value
        if synonyms:
            if overridden:
                entry.synonyms.add(name=key, value=overrides[key], source=SOURCE_DYNAMIC_TOPIC)
            if default is not None:
                entry.synonyms.add(name=key, value=default, source=SOURCE_DEFAULT)

    # --- alter -------------------------------------------------------------------------------

    def alter(self, request: pb.AlterConfigsRequest) -> pb.AlterConfigsResponse:
        response = pb.AlterConfigsResponse()
        for resource in request.resources:

            def change(_current: dict[str, str], entries: Any = resource.configs) -> dict[str, str | None]:
                _reject_duplicates(entries)
                return {e.name: e.value if e.HasField("value") else None for e in entries}

            response.responses.append(self._alter_one(resource, change, request.validate_only))
        return response

    def incremental_alter(
        self, request: pb.IncrementalAlterConfigsRequest
    ) -> pb.IncrementalAlterConfigsResponse:
        response = pb.IncrementalAlterConfigsResponse()
        for resource in request.resources:

            def change(current: dict[str, str], entries: Any = resource.configs,
                       resource_type: int = resource.resource_type) -> dict[str, str | None]:
                _reject_duplicates(entries)
                updated: dict[str, str | None] = dict(current)
                for entry in entries:
                    if resource_type == BROKER_RESOURCE:
                        apply_broker_operation(updated, entry)
                    else:
                        self._apply_operation(updated, entry)
                return updated

            response.responses.append(self._alter_one(resource, change, request.validate_only))
        return response

    def _alter_one(self, resource: Any, change: Any, validate_only: bool) -> pb.AlterConfigsResourceResponse:
        if resource.resource_type == BROKER_RESOURCE:
            return self._brokers.alter(resource, change, validate_only)
        result = pb.AlterConfigsResourceResponse(
            resource_type=resource.resource_type, resource_name=resource.resource_name
        )
        try:
            topic = resource.resource_name
            current = self._existing_topic_config(resource.resource_type, topic)
            configs = validate_topic_configs(change(current))
            if not validate_only:
                self._zk.set_topic_config(topic, configs, notify=True)
        except Exception as e:
            error = kafka_error(e)
            result.error_code, result.error_message = error.code, str(error.args[0])
        return result

    def _apply_operation(self, configs: dict[str, str | None], entry: Entry) -> None:
        spec = TOPIC_CONFIGS.get(entry.name)
        apply_config_operation(configs, entry, spec is not None and spec[0] is ConfigType.LIST,
                               self._defaults.get(entry.name, "") or "")

    # -----------------------------------------------------------------------------------------

    def _existing_topic_config(self, resource_type: int, topic: str) -> dict[str, str]:
        if resource_type != TOPIC_RESOURCE:
            raise KafkaError(
                f"Resource type {resource_type} is not served by the controller (only topics, 2, "
                f"and brokers, 4)",
                error=Errors.INVALID_REQUEST,
            )
        validate_topic_name(topic)
        if self._zk.get_topic_assignment(topic) is None:
            raise KafkaError(f"Topic {topic} does not exist", error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
        return self._zk.get_topic_config(topic)


def _reject_duplicates(entries: Any) -> None:
    names = [e.name for e in entries]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise KafkaError(f"Duplicate config keys: {', '.join(duplicated)}", error=Errors.INVALID_REQUEST)
