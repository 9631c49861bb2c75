"""Requests a node serves by handing them to a broker: the frame goes unchanged to a broker's Kafka
listener and the broker's answer comes back unchanged (same correlation id, same version). A
request is sent again, once, only when its connection failed; one the broker does not answer
within `request_timeout_s` is not, as the broker may yet apply it.

A coordinator is a node of the cluster to Kafka clients (see `coordinator_lookup`), so clients
send it what they send any node: Metadata, DescribeCluster, DescribeConfigs, admin requests.
`BrokerForwarder` answers those through the brokers, at the versions the brokers serve (learnt
from a broker's ApiVersions). Each forwarded request has a connection to itself for its time, so
answers cannot cross; idle connections are kept for the next ones. When the brokers' listeners
take SASL, each connection first authenticates with SASL/PLAIN as `sasl_login` (the node's own
principal, which the brokers' `super.users` names: forwarded requests are authorized as it). When
they take TLS (`ssl_context`), the connections are TLS and, on an SSL listener, the node's
certificate is its principal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable

from services.common.kafka_wire.codec import api_schema, decode_response, encode_request, peek_correlation_id
from services.common.kafka_wire.framing import FrameError, encode_frame, read_frame
from services.common.kafka_wire.security import encode_client_host
from services.common.security.sasl import PLAIN, plain_initial_response

logger = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY, ENVELOPE_KEY = 17, 36, 58
RESPONSE_MAX_BYTES = 1 << 30
DEFAULT_IDLE_CONNECTIONS = 8

Endpoints = Callable[[], Awaitable[list[tuple[str, int]]]]


class NoBrokerAnswered(Exception):
    """No broker's Kafka listener could be reached or answered."""


class BrokerForwarder:
    def __init__(self, endpoints: Endpoints, *, request_timeout_s: float = 30.0,
                 client_id: str = "odradek-forwarder", idle_connections: int = DEFAULT_IDLE_CONNECTIONS,
                 sasl_login: tuple[str, str] | None = None, ssl_context: ssl.SSLContext | None = None) -> None:
        self._endpoints = endpoints
        self.sasl_login = sasl_login
        self.ssl_context = ssl_context
        self.request_timeout_s = request_timeout_s
        self.client_id = client_id
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._idle_max = idle_connections
        self._versions: dict[int, tuple[int, int]] | None = None

    async def versions(self) -> dict[int, tuple[int, int]]:
        """api key -> (min, max) version a broker serves; empty while no broker answers."""
        if self._versions is None:
            schema = api_schema(API_VERSIONS_KEY, 0)
            frame = encode_request(schema, 0, self.client_id, schema.request_type())
            try:
                _, response = decode_response(schema, await self._send(frame))
            except NoBrokerAnswered:
                return {}
            self._versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        return self._versions

    async def forward(self, frame: bytes, principal: str | None = None, client_host: str = "") -> bytes:
        """The broker's answer frame (header and body) to `frame`; NoBrokerAnswered if none did.
        When this node authenticates to the brokers (`sasl_login`, or its certificate), `frame` goes in an Envelope
        naming the client's `principal` and `client_host`, and the broker's answer is unwrapped."""
        if (self.sasl_login is not None or self.ssl_context is not None) and principal is not None:
            schema = api_schema(ENVELOPE_KEY, 0)
            envelope = encode_request(schema, peek_correlation_id(frame), self.client_id, schema.request_type(
                request_data=frame, request_principal=principal.encode(), client_host_address=encode_client_host(
                    client_host)))
            _, response = decode_response(schema, await self._send(envelope))
            if response.error_code != 0 or response.response_data is None:
                raise NoBrokerAnswered(f"the broker refused the forwarded request: error {int(response.error_code)}")
            return response.response_data
        return await self._send(frame)

    async def _send(self, frame: bytes) -> bytes:
        failures = []
        for attempt in range(2):  # an idle connection the broker closed meanwhile is retried once
            connection = await self._connection(fresh=attempt > 0)
            reader, writer = connection
            try:
                writer.write(encode_frame(frame))
                await writer.drain()
                answer = await asyncio.wait_for(read_frame(reader, RESPONSE_MAX_BYTES), self.request_timeout_s)
            except TimeoutError:  # the broker has the request: sending it again could apply it twice
                writer.close()
                raise NoBrokerAnswered(f"the broker did not answer within {self.request_timeout_s} s") from None
            except (OSError, FrameError, asyncio.IncompleteReadError) as exc:
                failures.append(exc)
                writer.close()
                continue
            except BaseException:  # cancelled: the connection's answer would be read by no one
                writer.close()
                raise
            if answer is None:
                failures.append(ConnectionError("the broker closed the connection"))
                writer.close()
                continue
            self._release(connection)
            return answer
        raise NoBrokerAnswered(f"no broker answered: {failures}")

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _connection(self, fresh: bool) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._idle and not fresh:
            return self._idle.pop()
        errors = []
        for host, port in await self._endpoints():
            try:
                connection = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=self.ssl_context),
                                                    self.request_timeout_s)
            except (OSError, TimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc}")
                continue
            if self.sasl_login is None:
                return connection
            try:
                await asyncio.wait_for(self._authenticate(*connection), self.request_timeout_s)
                return connection
            except (OSError, TimeoutError, FrameError, asyncio.IncompleteReadError, NoBrokerAnswered) as exc:
                connection[1].close()
                errors.append(f"{host}:{port}: SASL: {exc}")
        raise NoBrokerAnswered("no broker's Kafka listener could be reached: " + ("; ".join(errors) or "none known"))

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for api_key, version, request in (
                (SASL_HANDSHAKE_KEY, 1, {"mechanism": PLAIN}),
                (SASL_AUTHENTICATE_KEY, 0, {"auth_bytes": plain_initial_response(*self.sasl_login)})):
            schema = api_schema(api_key, version)
            writer.write(encode_frame(encode_request(schema, 0, self.client_id, schema.request_type(**request))))
            await writer.drain()
            answer = await read_frame(reader, RESPONSE_MAX_BYTES)
            if answer is None:
                raise NoBrokerAnswered("the broker closed the connection during SASL authentication")
            _, response = decode_response(schema, answer)
            if response.error_code != 0:
                raise NoBrokerAnswered(f"SASL authentication refused: error {int(response.error_code)} "
                                       f"{getattr(response, 'error_message', '') or ''}")

    def _release(self, connection: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        if len(self._idle) < self._idle_max:
            self._idle.append(connection)
        else:
            connection[1].close()
