"""The Spark source's HTTP client of the gateway: one `GatewayClient` per driver or task.

It tries the configured gateway URLs in turn (the next on a connection error or a 5xx that says
retrying may help, until `timeout_s` passes; a 4xx is final), learns the cluster id once, and turns the gateway's
error answers back into exceptions: a REST error whose message names a Kafka error
(`NAME (code): text`, as the gateway writes them) becomes that `KafkaError`, any other a
`GatewayRequestError` with the HTTP status and REST Proxy code. Given an `authorization` (HTTP
Basic of the `kafka.sasl.*` user), every request carries it.

Requests go over one keep-alive connection per gateway (`http_connection`). Building a verifying TLS
context loads the CA bundle (tens of ms), so each process builds it once, and only when a gateway URL
is `https://`: a Python worker opens a client per task.
"""

from __future__ import annotations

import functools
import re
import ssl
import time
from typing import Any

from services.clients.spark.http_connection import TRANSPORT_ERRORS, GatewayConnection, GatewayResponse
from services.common.errors import KafkaError

DEFAULT_TIMEOUT_S = 60.0
RETRY_BACKOFF_S = 0.25
RETRIABLE_REST_CODES = frozenset({50003, 50301, 50302})
_KAFKA_MESSAGE = re.compile(r"^([A-Z_]+) \((-?\d+)\): (.*)$", re.DOTALL)


class GatewayRequestError(Exception):
    """An error answer of the gateway that names no Kafka error."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"HTTP {status} ({error_code}): {message}")
        self.status = status
        self.error_code = error_code
        self.message = message


def gateway_urls(text: str) -> list[str]:
    """The URLs of a `gateway` option: comma separated, `http://` assumed when no scheme is given."""
    urls = []
    for part in text.split(","):
        part = part.strip().rstrip("/")
        if part:
            urls.append(part if "://" in part else f"http://{part}")
    return urls


@functools.cache
def tls_context(verify: bool) -> ssl.SSLContext:
    """This process's TLS context: httpx's default verifying one (certifi's CAs, or SSL_CERT_FILE /
    SSL_CERT_DIR), or a bare one for clients of plain HTTP gateways (never used for a handshake)."""
    if not verify:
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    import httpx  # only for https gateways: importing it costs a Python worker 0.12 s

    return httpx.create_ssl_context()


def error_of(response: GatewayResponse) -> Exception:
    """The exception an error answer stands for."""
    try:
        body = response.json()
        code, message = int(body.get("error_code", response.status_code)), str(body.get("message", ""))
    except (ValueError, AttributeError):
        code, message = response.status_code, response.text[:500]
    named = _KAFKA_MESSAGE.match(message)
    if named:
        error = KafkaError.from_code(int(named.group(2)), named.group(3))
        if error.error_name == named.group(1):
            return error
    return GatewayRequestError(response.status_code, code, message)


def retriable(error: Exception) -> bool:
    if isinstance(error, TRANSPORT_ERRORS):
        return True
    if isinstance(error, KafkaError):
        return error.retriable
    return isinstance(error, GatewayRequestError) and (error.error_code in RETRIABLE_REST_CODES
                                                        or error.status in (502, 503, 504))


class GatewayClient:
    """Requests to the first gateway of `urls` that answers."""

    def __init__(self, urls: list[str] | tuple[str, ...], timeout_s: float = DEFAULT_TIMEOUT_S,
                 cluster_id: str | None = None, authorization: str | None = None) -> None:
        if not urls:
            raise ValueError("no gateway URL given")
        self.urls = list(urls)
        self.timeout_s = timeout_s
        self._current = 0
        context = tls_context(any(url.lower().startswith("https:") for url in self.urls))
        self._connections = [GatewayConnection(url, timeout_s, context) for url in self.urls]
        self._cluster_id = cluster_id
        self._authorization = {"Authorization": authorization} if authorization else {}

    def close(self) -> None:
        for connection in self._connections:
            connection.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = self.get_json("/v3/clusters")["data"][0]["cluster_id"]
        return self._cluster_id

    def cluster_path(self, path: str) -> str:
        """`/v3/clusters/<id>` + path."""
        return f"/v3/clusters/{self.cluster_id}{path}"

    def get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.request("GET", path, params=params).json()

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None, content: bytes | None = None) -> GatewayResponse:
        """The 2xx answer to a request, retried on other gateways while the error is retriable."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                response = self._connections[self._current].request(method, path, params,
                                                                    {**self._authorization, **(headers or {})},
                                                                    content)
                if response.is_success:
                    return response
                error: Exception = error_of(response)
                if response.status_code < 500:  # the gateway's own answer (404 for an unknown topic): final
                    raise error
            except TRANSPORT_ERRORS as transport_error:
                error = transport_error
            if not retriable(error) or time.monotonic() >= deadline:
                raise error
            self._current = (self._current + 1) % len(self.urls)
            time.sleep(RETRY_BACKOFF_S)
