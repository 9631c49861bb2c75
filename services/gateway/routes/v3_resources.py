"""What every REST Proxy v3 route shares: the resource shapes, the cluster check and the calls to
the cluster.

v3 answers are resources, `{"kind": "KafkaTopic", "metadata": {"self": <url>, "resource_name":
<crn>}, ...fields, "<relation>": {"related": <url>}}`, and collections of them, `{"kind":
"KafkaTopicList", "metadata": {"self": <url>, "next": null}, "data": [...]}`. URLs start at the
process's advertised base URL; resource names are CRNs (`crn:///kafka=<cluster>/topic=<t>`).

Every path starts at `/v3/clusters/{cluster_id}`: `known_cluster` (a dependency) answers 404
(`{"error_code": 404, "message": "Cluster <id> cannot be found."}`) to another id than the
cluster's. The id is asked of the controller once and kept, a cluster's id never changing.
`cluster_call` runs a blocking client call within `request.timeout.ms` and turns a `KafkaError`
into REST Proxy v3's answer (`errors.from_kafka_error_v3`). v3 bodies are `application/json`
(415 otherwise); `json_body` reads one (400 for what is not JSON, 422/42206 for an empty body).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import Depends, Request

from services.clients.admin_types import TopicDescription
from services.common.errors import Errors, KafkaError
from services.gateway.errors import (
    KAFKA_UNKNOWN_TOPIC_PARTITION,
    V3_INVALID_PAYLOAD,
    RestError,
    bad_request,
    cluster_not_found,
    error_responses,
    from_kafka_error_v3,
)
from services.gateway.media import JSON, media_type
from services.gateway.state import GatewayState, State

T = TypeVar("T")

CLUSTER_ID_KEY = "v3.cluster_id"
# What every v3 route may answer: a Kafka refusal, an unknown cluster or resource, a bad parameter, a
# Kafka error, an unavailable broker (the `responses` of every v3 router).
V3_ERRORS = error_responses(400, 404, 422, 500, 503)


async def cluster_call(state: GatewayState, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`state.blocking(call, ...)`, a Kafka error answered as REST Proxy v3 answers it."""
    try:
        return await state.blocking(call, *args, **kwargs)
    except KafkaError as error:
        raise from_kafka_error_v3(error) from None


async def topic_call(state: GatewayState, name: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`cluster_call` of a request about the existing topic `name`: a name Kafka calls illegal names
    no topic (404/40403, as an unknown topic)."""
    try:
        return await state.blocking(call, *args, **kwargs)
    except KafkaError as error:
        if error.code == Errors.INVALID_TOPIC_EXCEPTION:
            raise RestError(404, KAFKA_UNKNOWN_TOPIC_PARTITION, f"Topic {name} not found: {error}") from None
        raise from_kafka_error_v3(error) from None


async def describe_topic(state: GatewayState, name: str) -> TopicDescription:
    """The topic's description; 404/40403 when there is no such topic."""
    return (await topic_call(state, name, state.admin.describe_topics, [name]))[name]


def not_found() -> RestError:
    return RestError(404, 404, "HTTP 404 Not Found")


def invalid_payload(cause: str) -> RestError:
    return RestError(422, V3_INVALID_PAYLOAD, f"Payload error. {cause}")


def check_json_content(request: Request) -> None:
    """415 unless the request says its body is `application/json`."""
    if media_type(request.headers.get("content-type")) != JSON:
        raise RestError(415, 415, "HTTP 415 Unsupported Media Type")


async def json_body(request: Request) -> Any:
    """The request's JSON body: 415 for another content type, 422 when empty, 400 when not JSON."""
    check_json_content(request)
    body = await request.body()
    if not body.strip():
        raise invalid_payload("Request body is empty. Data is required.")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise bad_request(f"Error processing JSON: {error}") from None


async def live_brokers(state: GatewayState) -> set[int]:
    """The ids of the brokers the cluster has now."""
    return {node.node_id for node in (await cluster_call(state, state.admin.describe_cluster)).nodes}


async def local_cluster_id(state: GatewayState, *, refresh: bool = False) -> str:
    """The id of the cluster this gateway serves, asked of the controller the first time."""
    known = state.extensions.get(CLUSTER_ID_KEY)
    if known is None or refresh:
        described = await cluster_call(state, state.admin.describe_cluster)
        known = described.cluster_id or ""
        state.extensions[CLUSTER_ID_KEY] = known
    return known




async def known_cluster(cluster_id: str, state: State) -> str:
    """The path's cluster id once it is this cluster's (a FastAPI dependency); 404 otherwise."""
    if cluster_id != await local_cluster_id(state):
        raise cluster_not_found(cluster_id)
    return cluster_id


class Links:
    """Builds a v3 resource's URLs and CRN for one cluster: `links.url("topics", name)`."""

    def __init__(self, state: GatewayState, cluster_id: str) -> None:
        self.base = state.base_url.rstrip("/")
        self.cluster_id = cluster_id

    def url(self, *parts: object) -> str:
        path = "/".join(quote(str(part), safe="") for part in ("v3", "clusters", self.cluster_id, *parts))
        return f"{self.base}/{path}"

    def related(self, *parts: object) -> dict[str, str]:
        return {"related": self.url(*parts)}

    def crn(self, *pairs: tuple[str, object]) -> str:
        """`crn:///kafka=<cluster>/topic=<t>` for pairs (("topic", t),); a None value names just the kind."""
        return "crn:///" + "/".join(kind if value is None else f"{kind}={value}"
                                    for kind, value in (("kafka", self.cluster_id), *pairs))

    def resource(self, kind: str, path: tuple[object, ...], crn: tuple[tuple[str, object], ...],
                 **fields: Any) -> dict[str, Any]:
        """One resource: `kind`, `metadata` (self URL of `path`, resource name of `crn`), `fields`."""
        return {"kind": kind, "metadata": {"self": self.url(*path), "resource_name": self.crn(*crn)},
                "cluster_id": self.cluster_id, **fields}

    def collection(self, kind: str, path: tuple[object, ...], data: list[dict[str, Any]]) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"self": self.url(*path), "next": None}, "data": data}


KnownCluster = Annotated[str, Depends(known_cluster)]


def links(state: State, cluster_id: KnownCluster) -> Links:
    """A FastAPI dependency: the Links of the path's (checked) cluster."""
    return Links(state, cluster_id)


ClusterLinks = Annotated[Links, Depends(links)]
