"""The APIs a Kafka listener serves: API key -> (lowest version, highest version, async handler).

A handler takes the decoded request (a kio entity of the negotiated version) and the
`RequestContext`, and returns the response entity of that same version, or None to send nothing
(a Produce with acks=0). It awaits whatever it waits for and holds no thread. ApiVersions is
registered by the registry itself and advertises exactly the registered ranges, plus, when
`forward_others` gave it a `BrokerForwarder`, the APIs a broker serves that are neither registered
nor excluded: those requests are answered by a broker (see `forwarding`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from services.common.errors import Errors
from services.common.kafka_wire.codec import NO_THROTTLE, ApiSchema, api_schema, fields_of, kafka_error
from services.common.kafka_wire.forwarding import BrokerForwarder
from services.common.kafka_wire.security import (
    SASL_AUTHENTICATE_KEY,
    SASL_AUTHENTICATE_VERSIONS,
    SASL_HANDSHAKE_KEY,
    SASL_HANDSHAKE_VERSIONS,
)
from services.common.security.authorizer import OPEN_ACCESS, Access

API_VERSIONS_KEY = 18
API_VERSIONS_MAX_VERSION = 3


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request as received: header fields, the peer, the generated types of its version, and
    the connection's principal with the authorizer to ask (`access`)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    schema: ApiSchema
    access: Access = OPEN_ACCESS

    @property
    def response_type(self) -> type:
        return self.schema.response_type

    @property
    def response_module(self) -> ModuleType:
        return self.schema.response_module


Handler = Callable[[Any, RequestContext], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiEntry:
    min_version: int
    max_version: int
    handler: Handler


class ApiRegistry:
    def __init__(self) -> None:
        self._apis: dict[int, ApiEntry] = {}
        self.forwarder: BrokerForwarder | None = None
        self._not_forwarded: frozenset[int] = frozenset()
        self._forwarded_versions: dict[int, tuple[int, int]] = {}
        self.accepts_envelopes = False
        self.register(API_VERSIONS_KEY, 0, API_VERSIONS_MAX_VERSION, self._api_versions)

    def forward_others(self, forwarder: BrokerForwarder, excluded: frozenset[int] = frozenset()) -> None:
        """APIs not registered here, nor in `excluded`, are answered by a broker through `forwarder`."""
        self.forwarder = forwarder
        self._not_forwarded = excluded

    async def forwarded_versions(self) -> dict[int, tuple[int, int]]:
        """api key -> (min, max) of the APIs forwarded to a broker (asking one the first time)."""
        if self.forwarder is not None and not self._forwarded_versions:
            self._forwarded_versions = {key: span for key, span in (await self.forwarder.versions()).items()
                                        if key not in self._apis and key not in self._not_forwarded}
        return self._forwarded_versions

    def forwards(self, api_key: int, api_version: int) -> bool:
        """Whether a request of this API version goes to a broker."""
        span = self._forwarded_versions.get(api_key)
        return span is not None and span[0] <= api_version <= span[1]

    def serve_sasl(self) -> None:
        """Advertises SaslHandshake and SaslAuthenticate, which the listener itself answers."""
        for api_key, (low, high) in ((SASL_HANDSHAKE_KEY, SASL_HANDSHAKE_VERSIONS),
                                     (SASL_AUTHENTICATE_KEY, SASL_AUTHENTICATE_VERSIONS)):
            self.register(api_key, low, high, self._answered_by_listener, replace=True)

    async def _answered_by_listener(self, request: Any, context: RequestContext) -> Any:
        raise RuntimeError(f"API {context.api_key} is answered by the listener")

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler, *,
                 replace: bool = False) -> None:
        """Serves `api_key` at versions min..max; each must have generated types (LookupError if not)."""
        if api_key in self._apis and api_key != API_VERSIONS_KEY and not replace:
            raise ValueError(f"API {api_key} is already registered")
        if not 0 <= min_version <= max_version:
            raise ValueError(f"bad version range {min_version}..{max_version} for API {api_key}")
        for version in range(min_version, max_version + 1):
            api_schema(api_key, version)
        self._apis[api_key] = ApiEntry(min_version, max_version, handler)

    def lookup(self, api_key: int, api_version: int) -> ApiEntry | None:
        """The entry serving this API version, or None."""
        entry = self._apis.get(api_key)
        if entry is None or not entry.min_version <= api_version <= entry.max_version:
            return None
        return entry

    def is_registered(self, api_key: int) -> bool:
        return api_key in self._apis

    def versions(self) -> list[tuple[int, int, int]]:
        """(api_key, min_version, max_version) of every served API, by key."""
        spans = {key: (e.min_version, e.max_version) for key, e in self._apis.items()}
        spans.update({key: span for key, span in self._forwarded_versions.items() if key not in spans})
        return [(key, low, high) for key, (low, high) in sorted(spans.items())]

    def api_versions_response(self, schema: ApiSchema, error_code: int = Errors.NONE) -> Any:
        module = schema.response_module
        keys = tuple(module.ApiVersion(api_key=key, min_version=low, max_version=high)
                     for key, low, high in self.versions())
        return fields_of(schema.response_type, error_code=kafka_error(error_code), api_keys=keys,
                         throttle_time=NO_THROTTLE)

    async def _api_versions(self, request: Any, context: RequestContext) -> Any:
        await self.forwarded_versions()
        return self.api_versions_response(context.schema)
