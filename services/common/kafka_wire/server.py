"""The Kafka listener: an asyncio server of many connections, each read a frame at a time.

As Kafka's broker does, a connection's requests are handled one after another, so pipelined
requests are answered in the order sent (and a client's produces append in that order); other
connections go on meanwhile. A connection is closed, and no other, when it sends a size prefix
above `socket.request.max.bytes` or below zero, a frame that does not decode, an API key that is
not served, or a version outside the served range; an ApiVersions request of an unsupported
version is instead answered UNSUPPORTED_VERSION with the version 0 body, from which the client
picks a version both sides speak. A handler's unexpected exception also closes its connection.
A request the registry forwards goes to a broker; if none answers, its connection is closed, as a
Kafka client expects of a node it cannot use. On an SSL or SASL_SSL listener (`security`) the
connection is TLS; on a SASL_PLAINTEXT or SASL_SSL listener the SASL exchange comes first; each
request carries its connection's principal to the handler (`Access`), on an SSL listener the client
certificate's subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

from services.common.errors import Errors
from services.common.kafka_wire.codec import (
    NO_THROTTLE,
    MalformedRequest,
    api_schema,
    decode_request,
    encode_response,
    fields_of,
    kafka_error,
    peek_api_key_and_version,
    peek_correlation_id,
)
from services.common.kafka_wire.forwarding import NoBrokerAnswered
from services.common.kafka_wire.framing import FrameError, encode_frame, read_frame
from services.common.kafka_wire.registry import API_VERSIONS_KEY, ApiRegistry, RequestContext
from services.common.kafka_wire.security import (
    ENVELOPE_KEY,
    PLAINTEXT_SECURITY,
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SSL_PROTOCOL,
    ListenerSecurity,
    Session,
    decode_client_host,
)
from services.common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from services.common.security.authorizer import Access, audit
from services.common.security.sasl import SaslAuthenticationFailed, principal_of
from services.common.security.tls import peer_principal

logger = logging.getLogger(__name__)

DEFAULT_REQUEST_MAX_BYTES = 104857600  # socket.request.max.bytes
DEFAULT_LISTEN_BACKLOG = 50  # socket.listen.backlog.size


class ConnectionClosing(Exception):
    """The request breaks the protocol: its connection is closed."""


class AnswerThenClose(Exception):
    """The request is answered (`response`), then its connection is closed."""

    def __init__(self, response: bytes, reason: str) -> None:
        super().__init__(reason)
        self.response = response


UNAUTHENTICATED_APIS = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})


class KafkaWireServer:
    """Serves `registry` on host:port from the running event loop. `start` binds (port 0 picks a
    free port) and returns the bound port; `stop` closes the listener and every connection."""

    def __init__(self, registry: ApiRegistry, host: str, port: int, *,
                 request_max_bytes: int = DEFAULT_REQUEST_MAX_BYTES,
                 listen_backlog: int = DEFAULT_LISTEN_BACKLOG,
                 security: ListenerSecurity = PLAINTEXT_SECURITY) -> None:
        self.registry = registry
        self.security = security
        if security.sasl:
            registry.serve_sasl()
        self.host = host
        self.port = port
        self.request_max_bytes = request_max_bytes
        self.listen_backlog = listen_backlog
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port,
                                                  backlog=self.listen_backlog, ssl=self.security.ssl_context())
        self.port = self._server.sockets[0].getsockname()[1]
        logger.info("Kafka listener on %s:%d", self.host or "0.0.0.0", self.port)
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        peer = _peer_name(writer)
        session = Session(peer.rpartition(":")[0].strip("[]") or peer, authenticated=not self.security.sasl)
        if self.security.protocol == SSL_PROTOCOL:
            session.principal = peer_principal(writer.get_extra_info("ssl_object").getpeercert(binary_form=True))
        try:
            while True:
                frame = await read_frame(reader, self.request_max_bytes)
                if frame is None:
                    return
                if session.raw_tokens:
                    response = await self._raw_token(frame, session)
                else:
                    response = await self._handle(frame, peer, session)
                if response is not None:
                    writer.write(encode_frame(response))
                    await writer.drain()
        except AnswerThenClose as exc:
            logger.info("closing Kafka connection from %s: %s", peer, exc)
            writer.write(encode_frame(exc.response))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        except (FrameError, ConnectionClosing, MalformedRequest) as exc:
            logger.info("closing Kafka connection from %s: %s", peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("closing Kafka connection from %s after an unexpected error", peer)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _handle(self, frame: bytes, peer: str, session: Session | None = None) -> bytes | None:
        """The response (header and body) to one request frame, or None when none is due (a
        connection's `session`; by default an authenticated anonymous one)."""
        if session is None:
            session = Session(peer.rpartition(":")[0], authenticated=True)
        api_key, api_version = peek_api_key_and_version(frame)
        if self.security.sasl and api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY):
            return await self._sasl(frame, api_key, api_version, session)
        if not session.authenticated and api_key not in UNAUTHENTICATED_APIS:
            raise ConnectionClosing(f"API {api_key} before SASL authentication completed")
        if api_key == ENVELOPE_KEY and self.registry.accepts_envelopes and api_version == 0:
            return await self._envelope(frame, peer, session)
        entry = self.registry.lookup(api_key, api_version)
        if entry is None and self.registry.forwarder is not None:
            await self.registry.forwarded_versions()
            if self.registry.forwards(api_key, api_version):
                try:
                    return await self.registry.forwarder.forward(frame, session.principal, session.host)
                except NoBrokerAnswered as exc:
                    raise ConnectionClosing(str(exc)) from None
        if entry is None:
            if api_key == API_VERSIONS_KEY:
                schema = api_schema(API_VERSIONS_KEY, 0)
                response = self.registry.api_versions_response(schema, Errors.UNSUPPORTED_VERSION)
                return encode_response(schema, peek_correlation_id(frame), response)
            if self.registry.is_registered(api_key):
                raise ConnectionClosing(f"unsupported version {api_version} of API {api_key}")
            raise ConnectionClosing(f"API key {api_key} is not served")
        schema = api_schema(api_key, api_version)
        header, request = decode_request(schema, frame)
        context = RequestContext(api_key, api_version, header.correlation_id, header.client_id, peer, schema,
                                 Access(session.principal, session.host, self.security.authorizer))
        response = await entry.handler(request, context)
        if response is None:
            return None
        return encode_response(schema, header.correlation_id, response)


    async def _envelope(self, frame: bytes, peer: str, session: Session) -> bytes:
        """A request another node forwards for its client: allowed to a principal with CLUSTER_ACTION
        on the cluster, and handled as the client's principal and host that the envelope names."""
        schema = api_schema(ENVELOPE_KEY, 0)
        header, request = decode_request(schema, frame)
        respond = functools.partial(encode_response, schema, header.correlation_id)
        access = Access(session.principal, session.host, self.security.authorizer)
        if not access.allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return respond(fields_of(schema.response_type, response_data=None,
                                     error_code=kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED)))
        client = Session(decode_client_host(request.client_host_address),
                         request.request_principal.decode("utf-8", "replace"), authenticated=True)
        inner = await self._handle(request.request_data, peer, client)
        return respond(fields_of(schema.response_type, response_data=inner, error_code=kafka_error(Errors.NONE)))

    async def _sasl(self, frame: bytes, api_key: int, api_version: int, session: Session) -> bytes:
        """SaslHandshake picks the mechanism; SaslAuthenticate carries the exchange's messages."""
        entry = self.registry.lookup(api_key, api_version)
        if entry is None:
            raise ConnectionClosing(f"unsupported version {api_version} of API {api_key}")
        schema = api_schema(api_key, api_version)
        header, request = decode_request(schema, frame)
        respond = functools.partial(encode_response, schema, header.correlation_id)
        if session.authenticated:
            response = fields_of(schema.response_type, error_code=kafka_error(Errors.ILLEGAL_SASL_STATE),
                                 error_message="the connection is already authenticated", mechanisms=(),
                                 auth_bytes=b"", session_lifetime=NO_THROTTLE)
            raise AnswerThenClose(respond(response), "SASL request after authentication")
        if api_key == SASL_HANDSHAKE_KEY:
            mechanisms = self.security.mechanisms
            if session.sasl is not None or request.mechanism not in mechanisms:
                code = Errors.ILLEGAL_SASL_STATE if session.sasl is not None else Errors.UNSUPPORTED_SASL_MECHANISM
                raise AnswerThenClose(respond(fields_of(schema.response_type, error_code=kafka_error(code),
                                                        mechanisms=mechanisms)),
                                      f"SASL mechanism {request.mechanism!r} refused")
            session.sasl = self.security.sasl_server(request.mechanism)
            session.raw_tokens = api_version == 0
            return respond(fields_of(schema.response_type, error_code=kafka_error(Errors.NONE), mechanisms=mechanisms))
        if session.sasl is None:
            raise ConnectionClosing("SaslAuthenticate before SaslHandshake")
        try:
            challenge = await self._step(session, request.auth_bytes)
        except SaslAuthenticationFailed as exc:
            audit.info("Failed authentication with %s (%s)", session.host, exc)
            response = fields_of(schema.response_type, error_code=kafka_error(Errors.SASL_AUTHENTICATION_FAILED),
                                 error_message=str(exc), auth_bytes=b"", session_lifetime=NO_THROTTLE)
            raise AnswerThenClose(respond(response), f"SASL authentication failed: {exc}") from None
        return respond(fields_of(schema.response_type, error_code=kafka_error(Errors.NONE), error_message=None,
                                 auth_bytes=challenge, session_lifetime=NO_THROTTLE))

    async def _raw_token(self, frame: bytes, session: Session) -> bytes:
        """A bare SASL token after SaslHandshake v0; a failure closes the connection unanswered."""
        try:
            return await self._step(session, frame)
        except SaslAuthenticationFailed as exc:
            audit.info("Failed authentication with %s (%s)", session.host, exc)
            raise ConnectionClosing(f"SASL authentication failed: {exc}") from None

    async def _step(self, session: Session, message: bytes) -> bytes:
        # off the loop: a SCRAM step reads the user's credential from ZooKeeper
        challenge = await asyncio.get_running_loop().run_in_executor(None, session.sasl.step, message)
        if session.sasl.complete:
            session.principal, session.authenticated = principal_of(session.sasl.user), True
            session.raw_tokens = False
            logger.debug("authenticated %s from %s with %s", session.principal, session.host, session.sasl.mechanism)
        return challenge


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
