"""`BrokerConfigAdmin`: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of broker resources
(type 4) on the controller, over `/config/brokers/<id>` and `/config/brokers/<default>`.

Resource name "<id>" is one broker's dynamic configs, "" the cluster-wide defaults. Only the keys
of `common.dynamic_broker_configs` may be set; others are refused with INVALID_REQUEST naming them.
A write stores the configs and a change notification in one transaction; each broker picks it up
from `/config/changes` and applies it without a restart. The controller knows no broker's static
properties, so it describes the dynamic layers only: a broker's own keys (DYNAMIC_BROKER_CONFIG,
with the cluster default as a synonym) and the cluster defaults it inherits
(DYNAMIC_DEFAULT_BROKER_CONFIG); a broker's Kafka listener describes its full effective config.
"""

from __future__ import annotations

from typing import Any

from services.common.config import CONFIG_TYPE_CODES, ConfigType
from services.common.dynamic_broker_configs import (
    DEFAULT_BROKER_ENTITY,
    DYNAMIC_BROKER_CONFIG_SOURCE,
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE,
    broker_entity,
    validate_dynamic_broker_configs,
)
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.zk import OdradekZkClient
from services.controller.controller_protos import kafka_error

BROKER_RESOURCE = 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


class BrokerConfigAdmin:
    def __init__(self, zk: OdradekZkClient) -> None:
        self._zk = zk

    def describe(self, resource: Any, result: Any, include_synonyms: bool) -> None:
        """Fills `result` (a DescribeConfigsResult) for one broker resource."""
        try:
            entity = broker_entity(resource.resource_name)
            defaults = self._zk.get_broker_config(DEFAULT_BROKER_ENTITY)
            own = {} if entity == DEFAULT_BROKER_ENTITY else self._zk.get_broker_config(entity)
        except Exception as e:
            error = kafka_error(e)
            result.error_code, result.error_message = error.code, str(error.args[0])
            return
        wanted = set(resource.configuration_keys)
        for key in sorted(set(own) | set(defaults)):
            if wanted and key not in wanted:
                continue
            layers = [(own[key], DYNAMIC_BROKER_CONFIG_SOURCE)] if key in own else []
            if key in defaults:
                layers.append((defaults[key], DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE))
            kind = DYNAMIC_BROKER_CONFIGS.get(key, ConfigType.STRING)
            entry = result.configs.add(name=key, value=layers[0][0], read_only=False, config_source=layers[0][1],
                                       is_sensitive=False, config_type=CONFIG_TYPE_CODES.get(kind, 0))
            if include_synonyms:
                for value, source in layers:
                    entry.synonyms.add(name=key, value=value, source=source)

    def alter(self, resource: Any, change: Any, validate_only: bool) -> pb.AlterConfigsResourceResponse:
        """One broker resource of an (incremental) alter: `change(current)` gives the new configs."""
        result = pb.AlterConfigsResourceResponse(resource_type=resource.resource_type,
                                                 resource_name=resource.resource_name)
        try:
            entity = broker_entity(resource.resource_name)
            configs = validate_dynamic_broker_configs(change(self._zk.get_broker_config(entity)))
            if not validate_only:
                self._zk.set_broker_config(entity, configs)
        except Exception as e:
            error = kafka_error(e)
            result.error_code, result.error_message = error.code, str(error.args[0])
        return result


def apply_broker_operation(configs: dict[str, str | None], entry: Any) -> None:
    """One IncrementalAlterConfigs entry on a broker's dynamic configs (append/subtract for lists)."""
    apply_config_operation(configs, entry, DYNAMIC_BROKER_CONFIGS.get(entry.name) is ConfigType.LIST)


def apply_config_operation(configs: dict[str, str | None], entry: Any, is_list: bool, default: str = "") -> None:
    """One IncrementalAlterConfigs entry (set, delete, or append/subtract on a list key, starting
    from `default` when the key is unset) on a resource's configs, topic or broker alike."""
    key, operation = entry.name, entry.config_operation
    value = entry.value if entry.HasField("value") else None
    if operation == OP_DELETE:
        configs.pop(key, None)
    elif operation == OP_SET:
        configs[key] = value
    elif operation in (OP_APPEND, OP_SUBTRACT):
        if not is_list:
            raise KafkaError(f"Config value append/subtract is not allowed for config key {key}",
                             error=Errors.INVALID_REQUEST)
        items = [i.strip() for i in (configs.get(key, default) or "").split(",") if i.strip()]
        given = [i.strip() for i in (value or "").split(",") if i.strip()]
        items = items + [i for i in given if i not in items] if operation == OP_APPEND else \
            [i for i in items if i not in given]
        configs[key] = ",".join(items)
    else:
        raise KafkaError(f"Unknown config operation {operation} for {key}", error=Errors.INVALID_REQUEST)
