"""Requests and responses as kio entities (generated from Kafka's JSON message specs): the request
header of each API version (v1, or v2 for flexible versions), the response header (v0, or v1 for
flexible versions; ApiVersions always v0), and the bodies. Record batches travel as `bytes`."""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

_API_KEY_AND_VERSION = struct.Struct(">hh")
_CORRELATION_ID = struct.Struct(">i")
API_KEY_AND_VERSION_SIZE = _API_KEY_AND_VERSION.size
# durations (throttle_time, timeout, max_wait) are timedeltas in the generated types
NO_THROTTLE = timedelta(0)


class MalformedRequest(Exception):
    """A frame that does not decode as the request its header names."""


@dataclass(frozen=True, slots=True)
class ApiSchema:
    """One API version's generated request and response types and the modules holding their
    nested types (`response_module.PartitionProduceResponse`, ...)."""

    request_module: ModuleType
    response_module: ModuleType
    request_type: type
    response_type: type
    read_header: Any
    read_request: Any
    write_response_header: Any
    write_response: Any


@functools.cache
def api_schema(api_key: int, version: int) -> ApiSchema:
    """The generated types of one API version; raises LookupError when kio has none."""
    try:
        request_module = load_payload_module(api_key, version, EntityType.request)
        response_module = load_payload_module(api_key, version, EntityType.response)
    except Exception as exc:
        raise LookupError(f"no schema for API {api_key} v{version}") from exc
    request_type = _payload_type(request_module, "Request")
    response_type = _payload_type(response_module, "Response")
    return ApiSchema(request_module, response_module, request_type, response_type,
                     entity_reader(request_type.__header_schema__), entity_reader(request_type),
                     entity_writer(response_type.__header_schema__), entity_writer(response_type))


def _payload_type(module: ModuleType, suffix: str) -> type:
    for value in vars(module).values():
        if (isinstance(value, type) and value.__module__ == module.__name__ and value.__name__.endswith(suffix)
                and getattr(value, "__type__", None) in (EntityType.request, EntityType.response)):
            return value
    raise LookupError(f"{module.__name__} holds no {suffix} payload")


def peek_api_key_and_version(frame: bytes) -> tuple[int, int]:
    if len(frame) < API_KEY_AND_VERSION_SIZE:
        raise MalformedRequest(f"a frame of {len(frame)} bytes holds no request header")
    return _API_KEY_AND_VERSION.unpack_from(frame)


def peek_correlation_id(frame: bytes) -> int:
    if len(frame) < API_KEY_AND_VERSION_SIZE + _CORRELATION_ID.size:
        raise MalformedRequest(f"a frame of {len(frame)} bytes holds no correlation id")
    return _CORRELATION_ID.unpack_from(frame, API_KEY_AND_VERSION_SIZE)[0]


def decode_request(schema: ApiSchema, frame: bytes) -> tuple[Any, Any]:
    """(header, request) of one frame; MalformedRequest if it does not decode."""
    try:
        header, offset = schema.read_header(frame, 0)
        request, _ = schema.read_request(frame, offset)
    except Exception as exc:
        raise MalformedRequest(f"undecodable request: {exc}") from exc
    return header, request


def encode_response(schema: ApiSchema, correlation_id: int, response: Any) -> bytes:
    """Response header and body, without the size prefix."""
    buffer = io.BytesIO()
    schema.write_response_header(buffer, schema.response_type.__header_schema__(correlation_id=correlation_id))
    schema.write_response(buffer, response)
    return buffer.getvalue()


def encode_request(schema: ApiSchema, correlation_id: int, client_id: str | None, request: Any) -> bytes:
    """Request header and body, without the size prefix (a client's side of the codec)."""
    buffer = io.BytesIO()
    header_type = schema.request_type.__header_schema__
    entity_writer(header_type)(buffer, header_type(
        request_api_key=schema.request_type.__api_key__, request_api_version=schema.request_type.__version__,
        correlation_id=correlation_id, client_id=client_id))
    entity_writer(schema.request_type)(buffer, request)
    return buffer.getvalue()


def decode_response(schema: ApiSchema, frame: bytes) -> tuple[int, Any]:
    """(correlation id, response) of one response frame; MalformedRequest if it does not decode."""
    try:
        header, offset = entity_reader(schema.response_type.__header_schema__)(frame, 0)
        response, _ = entity_reader(schema.response_type)(frame, offset)
    except Exception as exc:
        raise MalformedRequest(f"undecodable response: {exc}") from exc
    return header.correlation_id, response


def kafka_error(code: int) -> KioErrorCode:
    """A code of `services.common.errors.Errors` as the generated types carry it."""
    return KioErrorCode(int(code))


def fields_of(entity_type: type, **values: Any) -> Any:
    """An entity of `entity_type` from those of `values` its version has (an older version lacks
    fields a newer one added); the rest take the schema's defaults, and a response's throttle_time
    is zero unless given (Odradek applies no quotas)."""
    known = entity_type.__dataclass_fields__
    chosen = {name: value for name, value in values.items() if name in known}
    if "throttle_time" in known and "throttle_time" not in chosen:
        chosen["throttle_time"] = NO_THROTTLE
    return entity_type(**chosen)
