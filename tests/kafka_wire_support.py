"""A bare Kafka protocol client for the tests: requests encoded with kio's generated types, one
response read at a time, so a test can say exactly which bytes go over the wire."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from services.common.kafka_wire import fields_of
from services.common.kafka_wire.framing import encode_frame


def request_frame(api_key: int, version: int, correlation_id: int, **body: Any) -> bytes:
    """A whole frame: size, request header of the version's kind, body from `body`'s fields."""
    request_type = load_request_schema(api_key, version)
    header_type = request_type.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header_type(request_api_key=api_key, request_api_version=version,
                                                   correlation_id=correlation_id, client_id="odradek-tests"))
    entity_writer(request_type)(buffer, fields_of(request_type, **body))
    return encode_frame(buffer.getvalue())


def decode_response(api_key: int, version: int, data: bytes) -> tuple[int, Any]:
    """(correlation id, body) of one response frame's payload."""
    response_type = load_response_schema(api_key, version)
    header, offset = entity_reader(response_type.__header_schema__)(data, 0)
    body, _ = entity_reader(response_type)(data, offset)
    return header.correlation_id, body


class WireConnection:
    """One blocking connection to a Kafka listener."""

    def __init__(self, host: str, port: int, timeout_s: float = 20.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)

    def send(self, api_key: int, version: int, correlation_id: int, **body: Any) -> None:
        self.sock.sendall(request_frame(api_key, version, correlation_id, **body))

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        (size,) = struct.unpack(">i", self._read(4))
        return decode_response(api_key, version, self._read(size))

    def call(self, api_key: int, version: int, correlation_id: int = 1, **body: Any) -> Any:
        self.send(api_key, version, correlation_id, **body)
        answered, response = self.receive(api_key, version)
        assert answered == correlation_id
        return response

    def _read(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise ConnectionError("the listener closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
