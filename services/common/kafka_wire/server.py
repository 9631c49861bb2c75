"""The Kafka listener: an asyncio server of many connections, each read a frame at a time.

As Kafka's broker does, a connection's requests are handled one after another, so pipelined
requests are answered in the order sent (and a client's produces append in that order); other
connections go on meanwhile. A connection is closed, and no other, when it sends a size prefix
above `socket.request.max.bytes` or below zero, a frame that does not decode, an API key that is
not served, or a version outside the served range; an ApiVersions request of an unsupported
version is instead answered UNSUPPORTED_VERSION with the version 0 body, from which the client
picks a version both sides speak. A handler's unexpected exception also closes its connection.
A request the registry forwards goes to a broker; if none answers, its connection is closed, as a
Kafka client expects of a node it cannot use.
"""

from __future__ import annotations

import asyncio
import logging

from services.common.errors import Errors
from services.common.kafka_wire.codec import (
    MalformedRequest,
    api_schema,
    decode_request,
    encode_response,
    peek_api_key_and_version,
    peek_correlation_id,
)
from services.common.kafka_wire.forwarding import NoBrokerAnswered
from services.common.kafka_wire.framing import FrameError, encode_frame, read_frame
from services.common.kafka_wire.registry import API_VERSIONS_KEY, ApiRegistry, RequestContext

logger = logging.getLogger(__name__)

DEFAULT_REQUEST_MAX_BYTES = 104857600  # socket.request.max.bytes
DEFAULT_LISTEN_BACKLOG = 50  # socket.listen.backlog.size


class ConnectionClosing(Exception):
    """The request breaks the protocol: its connection is closed."""


class KafkaWireServer:
    """Serves `registry` on host:port from the running event loop. `start` binds (port 0 picks a
    free port) and returns the bound port; `stop` closes the listener and every connection."""

    def __init__(self, registry: ApiRegistry, host: str, port: int, *,
                 request_max_bytes: int = DEFAULT_REQUEST_MAX_BYTES,
                 listen_backlog: int = DEFAULT_LISTEN_BACKLOG) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.request_max_bytes = request_max_bytes
        self.listen_backlog = listen_backlog
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port,
                                                  backlog=self.listen_backlog)
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
        try:
            while True:
                frame = await read_frame(reader, self.request_max_bytes)
                if frame is None:
                    return
                response = await self._handle(frame, peer)
                if response is not None:
                    writer.write(encode_frame(response))
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

    async def _handle(self, frame: bytes, peer: str) -> bytes | None:
        """The response (header and body) to one request frame, or None when none is due."""
        api_key, api_version = peek_api_key_and_version(frame)
        entry = self.registry.lookup(api_key, api_version)
        if entry is None and self.registry.forwarder is not None:
            await self.registry.forwarded_versions()
            if self.registry.forwards(api_key, api_version):
                try:
                    return await self.registry.forwarder.forward(frame)
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
        context = RequestContext(api_key, api_version, header.correlation_id, header.client_id, peer, schema)
        response = await entry.handler(request, context)
        if response is None:
            return None
        return encode_response(schema, header.correlation_id, response)


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
