"""The gateway's errors, in REST Proxy's shape: `{"error_code": <int>, "message": <str>}`.

`RestError(status, error_code, message)` is raised by routes; `install_error_handlers(app)` turns
it, a `KafkaError` from the clients (50003 when Kafka calls it retriable, else 50002, the Kafka
error's name in the message), FastAPI's body validation (422, 42202), HTTP errors of the framework
itself (`{"error_code": 404, "message": "HTTP 404 Not Found"}`; a 405's Allow names every method the
path answers) and anything unexpected (500) into that body. The constants are the REST Proxy codes
Odradek answers; `ERROR_STATUSES` says which status carries which, and `error_responses(...)` makes
the OpenAPI `responses` of statuses from it (the app documents the ErrorBody schema they name).
"""

from __future__ import annotations

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

try:
    from fastapi.routing import iter_route_contexts
except ImportError:  # FastAPI before included routers were kept whole: app.routes lists every route
    iter_route_contexts = None

from services.common.errors import Errors, KafkaError
from services.common.http_wire import JSON

logger = logging.getLogger(__name__)

TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
LEADER_NOT_AVAILABLE = 40404
CONSUMER_GROUP_NOT_FOUND = 40405
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_EXISTS = 40901
CONSUMER_ALREADY_SUBSCRIBED = 40902
ILLEGAL_STATE = 40903
INVALID_FORMAT = 42201
INVALID_BODY = 42202
INVALID_OFFSET = 42203
INVALID_KEY = 42204
INVALID_VALUE = 42205
INVALID_CONSUMER_CONFIG = 42206
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003
CLUSTER_UNAVAILABLE = 50301


class RestError(Exception):
    """An answer other than 2xx: HTTP `status`, REST Proxy `error_code` and a message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def topic_not_found(topic: str) -> RestError:
    return RestError(404, TOPIC_NOT_FOUND, f"Topic {topic} not found.")


def cluster_not_found(cluster_id: str) -> RestError:
    return RestError(404, 404, f"Cluster {cluster_id} cannot be found.")


def bad_request(message: str) -> RestError:
    return RestError(400, 400, message)


def partition_not_found(topic: str, partition: int) -> RestError:
    return RestError(404, PARTITION_NOT_FOUND, f"Partition {partition} of topic {topic} not found.")


def kafka_error_code(error: KafkaError) -> int:
    """The REST Proxy code for a Kafka error: 50003 when retrying may help, else 50002."""
    return KAFKA_RETRIABLE_ERROR if error.retriable else KAFKA_ERROR


def from_kafka_error(error: KafkaError) -> RestError:
    """A Kafka error as the gateway answers it; unknown topics and partitions are 404s."""
    if error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, TOPIC_NOT_FOUND, str(error))
    return RestError(500, kafka_error_code(error), str(error))


def error_response(error: RestError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers at the request's path (the routes of one path
    are one per method, and the router alone names only the first's in a 405's Allow)."""
    methods: set[str] = set()
    for route in _every_route(request.app.routes):
        if getattr(route, "methods", None) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= route.methods
    return sorted(methods)


def _every_route(routes: list[BaseRoute]) -> list[BaseRoute]:
    """The app's routes, those of included routers among them (FastAPI from 0.16x keeps an included
    router whole; the gateway's routers are included without a prefix, so their routes' own paths
    are the app's)."""
    if iter_route_contexts is None:
        return routes
    return [context.original_route for context in iter_route_contexts(routes)]


def install_error_handlers(app: FastAPI) -> None:
    """The handlers above, and in the app's OpenAPI: the ErrorBody schema, and 413 for every
    operation that reads a body (the body cap answers it before any route)."""
    describe = app.openapi

    def openapi() -> dict[str, object]:
        if app.openapi_schema is None:
            schema = describe()
            schema.setdefault("components", {}).setdefault("schemas", {})["ErrorBody"] = ErrorBody.model_json_schema()
            for operations in schema["paths"].values():
                for operation in operations.values():
                    if "requestBody" in operation:
                        operation["responses"].setdefault("413", error_responses(413)[413])
        return app.openapi_schema

    app.openapi = openapi

    @app.exception_handler(RestError)
    async def rest_error(_request: Request, error: RestError) -> JSONResponse:
        return error_response(error)

    @app.exception_handler(KafkaError)
    async def kafka_error(_request: Request, error: KafkaError) -> JSONResponse:
        return error_response(from_kafka_error(error))

    @app.exception_handler(RequestValidationError)
    async def invalid_body(_request: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item.get('loc', ()))}: {item.get('msg', '')}"
            for item in error.errors())
        return error_response(RestError(422, INVALID_BODY, f"Invalid request: {problems}"))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        phrase = HTTPStatus(error.status_code).phrase
        headers = dict(getattr(error, "headers", None) or {})
        if error.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        return JSONResponse({"error_code": error.status_code, "message": f"HTTP {error.status_code} {phrase}"},
                            status_code=error.status_code, headers=headers or None)

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, error: Exception) -> JSONResponse:
        logger.exception("unexpected error serving a request")
        return JSONResponse({"error_code": 500, "message": f"Internal server error: {type(error).__name__}"},
                            status_code=500)


# REST Proxy v3's codes: its Kafka exception mapping and its payload checks.
KAFKA_BAD_REQUEST = 40002
KAFKA_UNKNOWN_TOPIC_PARTITION = 40403
V3_INVALID_PAYLOAD = 42206
BROKER_NOT_AVAILABLE = 50302

_V3_BAD_REQUEST_ERRORS = frozenset({
    Errors.TOPIC_ALREADY_EXISTS, Errors.INVALID_PARTITIONS, Errors.INVALID_REPLICATION_FACTOR,
    Errors.INVALID_REPLICA_ASSIGNMENT, Errors.INVALID_CONFIG, Errors.INVALID_REQUEST, Errors.POLICY_VIOLATION,
    Errors.UNSUPPORTED_VERSION, Errors.SECURITY_DISABLED, Errors.UNKNOWN_SERVER_ERROR, Errors.INVALID_TOPIC_EXCEPTION,
})


def from_kafka_error_v3(error: KafkaError) -> RestError:
    """A Kafka error as REST Proxy v3 answers it: the admin's refusals of a request (an existing topic,
    a bad replication factor, ...) are 400/40002, an unknown topic or partition 404/40403, an
    unavailable broker 503/50302, the rest 500 with 50003 (retriable) or 50002."""
    if error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, KAFKA_UNKNOWN_TOPIC_PARTITION, str(error))
    if error.code in _V3_BAD_REQUEST_ERRORS:
        return RestError(400, KAFKA_BAD_REQUEST, str(error))
    if error.code == Errors.BROKER_NOT_AVAILABLE:
        return RestError(503, BROKER_NOT_AVAILABLE, str(error))
    return RestError(500, kafka_error_code(error), str(error))


class ErrorBody(BaseModel):
    """REST Proxy's error body: what every error answer of the gateway holds."""

    error_code: int
    message: str


ERROR_BODY_REF = {"$ref": "#/components/schemas/ErrorBody"}  # the app's OpenAPI holds the schema

# Every HTTP status the gateway answers with an ErrorBody: what it means, and the error codes it carries.
ERROR_STATUSES: dict[int, tuple[str, tuple[int, ...]]] = {
    400: ("The body is not JSON, or Kafka refused the request", (400, KAFKA_BAD_REQUEST)),
    404: ("No such cluster, topic, partition, consumer group, consumer instance or resource",
          (404, TOPIC_NOT_FOUND, PARTITION_NOT_FOUND, CONSUMER_INSTANCE_NOT_FOUND, KAFKA_UNKNOWN_TOPIC_PARTITION)),
    405: ("The resource does not answer this method (Allow names those it answers)", (405,)),
    406: ("Accept admits none of the media types the operation answers", (406, CONSUMER_FORMAT_MISMATCH)),
    409: ("The consumer instance exists already, or its state refuses the call",
          (CONSUMER_ALREADY_EXISTS, ILLEGAL_STATE)),
    413: ("The body exceeds max.request.bytes", (413,)),
    415: ("The body's Content-Type is not one the operation reads", (415,)),
    422: ("A parameter, the body or one of its records is invalid",
          (INVALID_FORMAT, INVALID_BODY, INVALID_OFFSET, INVALID_KEY, INVALID_VALUE, INVALID_CONSUMER_CONFIG)),
    429: ("The process holds consumer.max.instances consumer instances", (429,)),
    500: ("Kafka answered an error, or the gateway failed", (500, KAFKA_ERROR, KAFKA_RETRIABLE_ERROR)),
    503: ("The cluster, a broker or the console's sampler is unavailable", (503, CLUSTER_UNAVAILABLE,
                                                                           BROKER_NOT_AVAILABLE)),
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI `responses` entries of these statuses (from ERROR_STATUSES): an ErrorBody in JSON."""
    described: dict[int | str, dict[str, object]] = {}
    for status in statuses:
        meaning, codes = ERROR_STATUSES[status]
        described[status] = {"description": f"{meaning} (error_code {', '.join(map(str, codes))}).",
                             "content": {JSON: {"schema": ERROR_BODY_REF}}}
    return described
