"""REST Proxy v3's config resources: a topic's configs and a broker's, each listed, read, set,
reset to its default and altered in a batch.

    GET    /v3/clusters/{cluster_id}/topics/{t}/configs[/{name}]     KafkaTopicConfig(List)
    PUT    /v3/clusters/{cluster_id}/topics/{t}/configs/{name}       204 ({"value": <string>})
    DELETE /v3/clusters/{cluster_id}/topics/{t}/configs/{name}       204 (back to its default)
    POST   /v3/clusters/{cluster_id}/topics/{t}/configs:alter        204 ({"data": [{"name", "value",
                                                                     "operation": "SET" | "DELETE"}],
                                                                     "validate_only"})
    the same under /v3/clusters/{cluster_id}/brokers/{b}/configs     KafkaBrokerConfig(List)

Configs are what the Admin's DescribeConfigs answers, with synonyms; changes are its
IncrementalAlterConfigs, as REST Proxy makes them. A change the cluster refuses (an unknown key, a
bad value, a broker config that cannot change while the broker runs) is Kafka's error, 400/40002.
The cluster lists a broker's dynamic configs (its own and the cluster-wide defaults), and a key
that may change live can be set before it is listed. An unknown topic is 404/40403; an unknown
broker, or a config the resource does not have (read, set or reset one at a time), 404/404.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from services.clients.admin_types import BROKER_RESOURCE, CONFIG_SOURCES, TOPIC_RESOURCE, ConfigEntry
from services.common.dynamic_broker_configs import DYNAMIC_BROKER_CONFIGS
from services.gateway.errors import RestError, error_responses
from services.gateway.routes.v3_resources import (
    V3_ERRORS,
    ClusterLinks,
    KnownCluster,
    Links,
    bad_request,
    cluster_call,
    json_body,
    live_brokers,
    topic_call,
)
from services.gateway.state import GatewayState, State

router = APIRouter(tags=["v3"], responses=V3_ERRORS)

SET, DELETE = "SET", "DELETE"

UPDATE_CONFIG_SCHEMA = {
    "type": "object", "required": ["value"],
    "properties": {"value": {"type": ["string", "null"]}},
}
ALTER_CONFIGS_SCHEMA = {
    "type": "object", "required": ["data"],
    "properties": {
        "data": {"type": "array", "items": {
            "type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "value": {"type": ["string", "null"]},
                           "operation": {"enum": [SET, DELETE, None]}}}},
        "validate_only": {"type": "boolean"},
    },
}


def _body_of(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@dataclass(frozen=True)
class ConfigResource:
    """A topic or broker whose configs a request is about: its Admin resource type and name, its
    path and CRN under the cluster, and its fields in each config's answer."""

    kind: str  # "Topic" or "Broker": KafkaTopicConfig, KafkaBrokerConfigList, ...
    resource_type: int
    name: str
    path: tuple[object, ...]
    crn: tuple[tuple[str, object], ...]
    fields: dict[str, object]

    def config_data(self, at: Links, entry: ConfigEntry) -> dict[str, Any]:
        hidden = entry.is_sensitive
        return at.resource(f"Kafka{self.kind}Config", (*self.path, "configs", entry.name),
                           (*self.crn, ("config", entry.name)), **self.fields, name=entry.name,
                           value=None if hidden else entry.value, is_default=entry.is_default,
                           is_read_only=entry.read_only, is_sensitive=hidden, source=entry.source_name,
                           synonyms=[{"name": s.name, "value": None if hidden else s.value,
                                      "source": CONFIG_SOURCES.get(s.source, "UNKNOWN")} for s in entry.synonyms])

    def config_not_found(self, config_name: str) -> RestError:
        return RestError(404, 404, f"Config {config_name} cannot be found for {self.kind.lower()} {self.name}.")

    async def configs(self, state: GatewayState) -> dict[str, ConfigEntry]:
        return (await self._call(state, state.admin.describe_configs, [self.name], resource_type=self.resource_type,
                                 include_synonyms=True))[self.name]

    async def config(self, state: GatewayState, config_name: str) -> ConfigEntry:
        entry = (await self.configs(state)).get(config_name)
        if entry is None:
            raise self.config_not_found(config_name)
        return entry

    async def alter(self, state: GatewayState, changes: dict[str, str | None], validate_only: bool = False) -> None:
        """Sets each config to its value, or back to its default where the value is None."""
        await self._call(state, state.admin.incremental_alter_configs, self.name, changes,
                         resource_type=self.resource_type, validate_only=validate_only)

    async def _call(self, state: GatewayState, call: Any, *args: Any, **kwargs: Any) -> Any:
        if self.resource_type == TOPIC_RESOURCE:
            return await topic_call(state, self.name, call, *args, **kwargs)
        return await cluster_call(state, call, *args, **kwargs)


def topic_resource(topic_name: str) -> ConfigResource:
    return ConfigResource("Topic", TOPIC_RESOURCE, topic_name, ("topics", topic_name), (("topic", topic_name),),
                          {"topic_name": topic_name})


async def broker_resource(state: GatewayState, broker_id: int) -> ConfigResource:
    """The broker's resource; 404 unless it is a live broker."""
    if broker_id not in await live_brokers(state):
        raise RestError(404, 404, f"Broker {broker_id} cannot be found.")
    return ConfigResource("Broker", BROKER_RESOURCE, str(broker_id), ("brokers", broker_id),
                          (("broker", broker_id),), {"broker_id": broker_id})


# ------------------------------------------------------------------ what both resources answer

async def list_configs(state: GatewayState, at: Links, resource: ConfigResource) -> dict[str, Any]:
    configs = await resource.configs(state)
    return at.collection(f"Kafka{resource.kind}ConfigList", (*resource.path, "configs"),
                         [resource.config_data(at, configs[name]) for name in sorted(configs)])


async def update_config(request: Request, state: GatewayState, resource: ConfigResource, config_name: str) -> Response:
    value = _update_value(await json_body(request))
    if resource.resource_type != BROKER_RESOURCE or config_name not in DYNAMIC_BROKER_CONFIGS:
        await resource.config(state, config_name)  # a broker's dynamic key may be set before it is listed
    await resource.alter(state, {config_name: value})
    return Response(status_code=204)


async def reset_config(state: GatewayState, resource: ConfigResource, config_name: str) -> Response:
    await resource.config(state, config_name)
    await resource.alter(state, {config_name: None})
    return Response(status_code=204)


async def alter_configs(request: Request, state: GatewayState, resource: ConfigResource) -> Response:
    changes, validate_only = _alterations(await json_body(request))
    await resource.alter(state, changes, validate_only)
    return Response(status_code=204)


def _update_value(body: Any) -> str | None:
    """The value of an UpdateConfigRequest (`{"value": <string>}`; null resets the config)."""
    if not isinstance(body, dict) or "value" not in body or not isinstance(body["value"], (str, type(None))):
        raise bad_request('The body must be {"value": <string or null>}.')
    return body["value"]


def _alterations(body: Any) -> tuple[dict[str, str | None], bool]:
    """The changes of an AlterConfigBatchRequest ({name: value, None to reset}) and its validate_only."""
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise bad_request('The body must be {"data": [{"name": ..., "value": ..., "operation": "SET" | "DELETE"}]}.')
    validate_only = body.get("validate_only", False)
    if not isinstance(validate_only, bool):
        raise bad_request("validate_only must be a boolean.")
    changes: dict[str, str | None] = {}
    for item in body["data"]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise bad_request("Each entry of data must be an object with a string name.")
        name, value, operation = item["name"], item.get("value"), item.get("operation") or SET
        if operation not in (SET, DELETE):
            raise bad_request(f"The operation of {name} must be SET or DELETE, not {operation!r}.")
        if operation == SET and not isinstance(value, str):
            raise bad_request(f"Setting {name} needs a string value.")
        if name in changes:
            raise bad_request(f"Config {name} is named more than once.")
        changes[name] = value if operation == SET else None
    return changes, validate_only


# ------------------------------------------------------------------ topic configs

TOPIC_CONFIGS = "/v3/clusters/{cluster_id}/topics/{topic_name}/configs"


@router.get(TOPIC_CONFIGS, summary="List a topic's configs")
async def list_topic_configs(topic_name: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    return await list_configs(state, at, topic_resource(topic_name))


@router.get(TOPIC_CONFIGS + "/{config_name}", summary="Get a topic's config")
async def get_topic_config(topic_name: str, config_name: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    resource = topic_resource(topic_name)
    return resource.config_data(at, await resource.config(state, config_name))


@router.put(TOPIC_CONFIGS + "/{config_name}", status_code=204, summary="Set a topic's config",
            responses=error_responses(415), openapi_extra=_body_of(UPDATE_CONFIG_SCHEMA))
async def update_topic_config(topic_name: str, config_name: str, request: Request, state: State,
                              _cluster_id: KnownCluster) -> Response:
    return await update_config(request, state, topic_resource(topic_name), config_name)


@router.delete(TOPIC_CONFIGS + "/{config_name}", status_code=204, summary="Reset a topic's config to its default")
async def reset_topic_config(topic_name: str, config_name: str, state: State, _cluster_id: KnownCluster) -> Response:
    return await reset_config(state, topic_resource(topic_name), config_name)


@router.post(TOPIC_CONFIGS + ":alter", status_code=204, summary="Set and reset a topic's configs at once",
             responses=error_responses(415), openapi_extra=_body_of(ALTER_CONFIGS_SCHEMA))
async def alter_topic_configs(topic_name: str, request: Request, state: State, _cluster_id: KnownCluster) -> Response:
    return await alter_configs(request, state, topic_resource(topic_name))


# ------------------------------------------------------------------ broker configs

BROKER_CONFIGS = "/v3/clusters/{cluster_id}/brokers/{broker_id}/configs"


@router.get(BROKER_CONFIGS, summary="List a broker's configs")
async def list_broker_configs(broker_id: int, state: State, at: ClusterLinks) -> dict[str, Any]:
    return await list_configs(state, at, await broker_resource(state, broker_id))


@router.get(BROKER_CONFIGS + "/{config_name}", summary="Get a broker's config")
async def get_broker_config(broker_id: int, config_name: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    resource = await broker_resource(state, broker_id)
    return resource.config_data(at, await resource.config(state, config_name))


@router.put(BROKER_CONFIGS + "/{config_name}", status_code=204, summary="Set a broker's config",
            responses=error_responses(415), openapi_extra=_body_of(UPDATE_CONFIG_SCHEMA))
async def update_broker_config(broker_id: int, config_name: str, request: Request, state: State,
                               _cluster_id: KnownCluster) -> Response:
    return await update_config(request, state, await broker_resource(state, broker_id), config_name)


@router.delete(BROKER_CONFIGS + "/{config_name}", status_code=204, summary="Reset a broker's config")
async def reset_broker_config(broker_id: int, config_name: str, state: State, _cluster_id: KnownCluster) -> Response:
    return await reset_config(state, await broker_resource(state, broker_id), config_name)


@router.post(BROKER_CONFIGS + ":alter", status_code=204, summary="Set and reset a broker's configs at once",
             responses=error_responses(415), openapi_extra=_body_of(ALTER_CONFIGS_SCHEMA))
async def alter_broker_configs(broker_id: int, request: Request, state: State, _cluster_id: KnownCluster) -> Response:
    return await alter_configs(request, state, await broker_resource(state, broker_id))
