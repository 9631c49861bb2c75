"""The Spark source's gateway client against a stub HTTP server on loopback: answers, keep-alive,
reconnection after the server closed an idle connection, error mapping, URL prefixes and the TLS
context it builds once per process."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from services.clients.spark.gateway import GatewayClient, GatewayRequestError, error_of, tls_context
from services.clients.spark.http_connection import TRANSPORT_ERRORS, GatewayConnection
from services.common.errors import Errors, KafkaError


class StubGateway(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: set[int] = set()
    seen: list[tuple[str, str, bytes]] = []
    authorizations: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self._answer()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        StubGateway.seen.append((self.command, self.path, self.rfile.read(length)))
        StubGateway.authorizations.append(self.headers.get("Authorization"))
        StubGateway.connections.add(self.client_address[1])
        if "missing" in self.path:
            status, body = 404, {"error_code": 40403, "message": "UNKNOWN_TOPIC_OR_PARTITION (3): no such topic"}
        elif "broken" in self.path:
            status, body = 400, {"error_code": 40002, "message": "bad request"}
        else:
            status, body = 200, {"path": self.path}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Odradek-Next-Offset", "42")
        self.send_header("Content-Length", str(len(data)))
        if "close" in self.path:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def gateway_url() -> Iterator[str]:
    StubGateway.connections = set()
    StubGateway.seen = []
    StubGateway.authorizations = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubGateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_answers_come_back_as_responses_over_one_connection(gateway_url: str) -> None:
    with GatewayClient([gateway_url], timeout_s=5) as client:
        first = client.request("GET", "/v3/records", params={"offset": 7, "isolation_level": "read_committed"},
                               headers={"Accept": "application/json"})
        second = client.request("POST", "/v3/records", content=b"payload")
    assert first.status_code == 200 and first.is_success
    assert first.json() == {"path": "/v3/records?offset=7&isolation_level=read_committed"}
    assert first.headers["x-odradek-next-offset"] == "42" and first.headers["X-Missing"] is None
    assert first.text == '{"path": "/v3/records?offset=7&isolation_level=read_committed"}'
    assert second.json() == {"path": "/v3/records"}
    assert StubGateway.seen[-1] == ("POST", "/v3/records", b"payload")
    assert len(StubGateway.connections) == 1


def test_a_connection_the_gateway_closed_is_reopened(gateway_url: str) -> None:
    with GatewayClient([gateway_url], timeout_s=5) as client:
        assert client.request("GET", "/close").json() == {"path": "/close"}
        assert client.request("GET", "/again").json() == {"path": "/again"}
    assert len(StubGateway.connections) == 2


def test_error_answers_become_kafka_or_gateway_errors(gateway_url: str) -> None:
    with GatewayClient([gateway_url], timeout_s=5) as client:
        with pytest.raises(KafkaError) as named:
            client.get_json("/missing")
        with pytest.raises(GatewayRequestError) as unnamed:
            client.get_json("/broken")
    assert named.value.code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert (unnamed.value.status, unnamed.value.error_code) == (400, 40002)


def test_an_answer_that_is_not_json_is_a_gateway_error_with_its_text(gateway_url: str) -> None:
    connection = GatewayConnection(gateway_url, 5, tls_context(False))
    try:
        answer = connection.request("GET", "/broken")
    finally:
        connection.close()
    answer.content = b"<html>Bad Gateway</html>"
    answer.status_code = 502
    error = error_of(answer)
    assert isinstance(error, GatewayRequestError)
    assert (error.status, error.error_code, error.message) == (502, 502, "<html>Bad Gateway</html>")


def test_a_url_prefix_and_the_path_are_kept(gateway_url: str) -> None:
    connection = GatewayConnection(f"{gateway_url}/proxy/", 5, tls_context(False))
    try:
        assert connection.request("GET", "/topics/a b").json() == {"path": "/proxy/topics/a%20b"}
    finally:
        connection.close()


def test_a_refused_connection_is_a_transport_error() -> None:
    connection = GatewayConnection("http://127.0.0.1:1", 5, tls_context(False))
    with pytest.raises(TRANSPORT_ERRORS):
        connection.request("GET", "/v3/clusters")


def test_the_tls_context_is_built_once_and_verifies_only_for_https() -> None:
    assert tls_context(True) is tls_context(True)
    verifying = tls_context(True)
    assert verifying.verify_mode == ssl.CERT_REQUIRED and verifying.check_hostname
    assert verifying.cert_store_stats()["x509_ca"] > 0
    assert tls_context(False).cert_store_stats()["x509_ca"] == 0


def test_every_request_carries_the_given_authorization(gateway_url: str) -> None:
    with GatewayClient([gateway_url], 5, authorization="Basic dTpw") as client:
        client.get_json("/a")
        client.request("POST", "/b", headers={"Content-Type": "application/json"}, content=b"{}")
    with GatewayClient([gateway_url], 5) as client:
        client.get_json("/c")
    assert StubGateway.authorizations == ["Basic dTpw", "Basic dTpw", None]
