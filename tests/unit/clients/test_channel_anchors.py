"""The channel pool's anchor calls (see services.clients.transport.channels): opened by the first
asynchronous call on a channel, keeping one completion thread for every later call, ended by the
server's stop without holding it, reopened after a restart within the reconnect back-off, cancelled
by `close()`, over TLS and with SASL credentials (refused when they do not verify), against a real
`ServiceRuntime` (a grpc.aio server with the anchor method)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import grpc
import pytest

from services.clients.client_config import CommonClientConfig
from services.clients.transport import BROKER, ChannelPool
from services.clients.transport.channels import error_from_rpc
from services.common.clock import ManualClock
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.security.grpc_credentials import PasswordVerifier, basic_authorization
from services.common.security.sasl import make_scram_credential
from services.common.security.tls import TlsSettings
from services.common.service import ANCHOR_METHOD, ServiceRuntime
from services.devcluster.proc import wait_until
from tests.tls_support import tls_runtime

WAIT_S = 10.0
REQUEST = broker_pb2.MetadataRequest()


def start_runtime(port: int = 0, tls: TlsSettings | None = None) -> ServiceRuntime:
    runtime = ServiceRuntime("anchor-test", f"127.0.0.1:{port}", max_workers=2, tls=tls)
    runtime.start()
    runtime.set_serving(True)
    return runtime


def held_anchors(runtime: ServiceRuntime) -> int:
    return runtime._anchors.held


@pytest.fixture
def runtime():
    runtime = start_runtime()
    yield runtime
    runtime.shutdown(grace_s=0.1)


def completing_threads(pool: ChannelPool, target: str, calls: int) -> list[threading.Thread]:
    """The threads that completed `calls` sends made one after another."""
    threads: list[threading.Thread] = []
    for _ in range(calls):
        done = threading.Event()
        call = pool.send(target, BROKER, "Metadata", REQUEST)  # unimplemented: answered at once
        call.add_done_callback(lambda _call, done=done: (threads.append(threading.current_thread()), done.set()))
        assert done.wait(WAIT_S)
        call.outcome()
    return threads


def test_sends_on_an_anchored_channel_complete_on_one_thread_and_close_cancels_the_anchor(runtime):
    target = f"127.0.0.1:{runtime.bound_port}"
    pool = ChannelPool()
    try:
        assert not pool.anchored(target)
        threads = completing_threads(pool, target, 20)
        assert pool.anchored(target)
        assert len(set(threads)) == 1
        wait_until(lambda: held_anchors(runtime) == 1, WAIT_S, 0.01, message="the anchor to reach the server")
    finally:
        pool.close()
    assert not pool.anchored(target)
    wait_until(lambda: held_anchors(runtime) == 0, WAIT_S, 0.01, message="the cancelled anchor to end on the server")


def test_blocking_calls_open_no_anchor(runtime):
    target = f"127.0.0.1:{runtime.bound_port}"
    with ChannelPool() as pool:
        with pytest.raises(KafkaError):
            pool.call(target, BROKER, "Metadata", REQUEST)
        assert not pool.anchored(target) and held_anchors(runtime) == 0


def test_a_stopping_server_ends_the_anchor_at_once_and_a_restart_reopens_it_after_the_backoff(caplog):
    clock = ManualClock()
    runtime = start_runtime()
    port = runtime.bound_port
    target = f"127.0.0.1:{port}"
    with ChannelPool(reconnect_backoff_ms=50, reconnect_backoff_max_ms=200, clock=clock) as pool:
        try:
            completing_threads(pool, target, 1)
            wait_until(lambda: held_anchors(runtime) == 1, WAIT_S, 0.01, message="the anchor to reach the server")
            with caplog.at_level(logging.DEBUG, logger="services.clients"):
                started = time.monotonic()
                runtime.shutdown(grace_s=5.0)
                assert time.monotonic() - started < 3.0  # the anchor did not hold the stop's grace period
                wait_until(lambda: not pool.anchored(target), WAIT_S, 0.01, message="the anchor to end")
                restarted = start_runtime(port)
                runtime = restarted
                completing_threads(pool, target, 1)  # within the back-off: no new anchor yet
                assert not pool.anchored(target) and held_anchors(restarted) == 0
                clock.advance(50)
                completing_threads(pool, target, 1)
                assert pool.anchored(target)
                wait_until(lambda: held_anchors(restarted) == 1, WAIT_S, 0.01, message="the reopened anchor")
            assert [r for r in caplog.records if r.name.startswith("services.clients")] == []
        finally:
            runtime.shutdown(grace_s=0.1)


def test_anchors_ending_young_back_off_exponentially_up_to_the_bound():
    clock = ManualClock()
    target = "127.0.0.1:1"  # nothing listens: every anchor ends at once

    def endings() -> int:
        return pool._anchors[target].young_endings

    def send_and_count_endings() -> int:
        before = endings() if target in pool._anchors else 0
        opened = pool.send(target, BROKER, "Metadata", REQUEST) and pool.anchored(target)
        if opened:
            wait_until(lambda: endings() == before + 1, WAIT_S, 0.01, message="the anchor to fail")
        return endings() - before

    with ChannelPool(request_timeout_ms=2000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=200,
                     clock=clock) as pool:
        assert send_and_count_endings() == 1
        for backoff_ms in (50, 100, 200, 200):
            clock.advance(backoff_ms - 1)
            assert send_and_count_endings() == 0
            clock.advance(1)
            assert send_and_count_endings() == 1


def test_a_server_without_the_anchor_method_is_not_asked_again(fake_nodes):
    (node,) = fake_nodes(1)
    node.on("Metadata", broker_pb2.MetadataResponse(cluster_id="c"))
    clock = ManualClock()
    with ChannelPool(reconnect_backoff_ms=50, clock=clock) as pool:
        assert pool.send(node.address, BROKER, "Metadata", REQUEST).result().cluster_id == "c"
        wait_until(lambda: pool._anchors[node.address].abandoned, WAIT_S, 0.01, message="the anchor to be refused")
        clock.advance(10_000)
        assert pool.send(node.address, BROKER, "Metadata", REQUEST).result().cluster_id == "c"
        assert not pool.anchored(node.address)


def test_anchors_are_served_over_tls_to_sasl_users(tmp_path):
    alice = {"SCRAM-SHA-512": make_scram_credential("SCRAM-SHA-512", "s3cret").encode()}
    verifier = PasswordVerifier(lambda user: alice if user == "alice" else {})
    with tls_runtime(tmp_path, "anchor-tls-test", verifier) as served:
        for protocol, extra in (("SSL", {}), ("SASL_SSL", {"sasl.mechanism": "SCRAM-SHA-512",
                                                         "sasl.username": "alice", "sasl.password": "s3cret"})):
            config = CommonClientConfig.load({"bootstrap.servers": served.target, "security.protocol": protocol,
                                             "ssl.ca.location": served.ca_path, **extra}, env={})
            with ChannelPool.from_config(config) as pool:
                assert len(set(completing_threads(pool, served.target, 5))) == 1
                wait_until(lambda: held_anchors(served.runtime) == 1, WAIT_S, 0.01,
                           message=f"the {protocol} anchor")
                assert pool.anchored(served.target)
            wait_until(lambda: held_anchors(served.runtime) == 0, WAIT_S, 0.01, message="the anchor to be cancelled")


def test_an_anchor_with_credentials_that_do_not_verify_is_refused(tmp_path):
    alice = {"SCRAM-SHA-512": make_scram_credential("SCRAM-SHA-512", "s3cret").encode()}
    with tls_runtime(tmp_path, "anchor-refused-test", PasswordVerifier(lambda user: alice if user == "alice" else {})
                     ) as served:
        credentials = grpc.ssl_channel_credentials(Path(served.ca_path).read_bytes())
        with grpc.secure_channel(served.target, credentials) as channel:
            call = channel.unary_stream(ANCHOR_METHOD)(
                b"", metadata=[("authorization", basic_authorization("alice", "wrong"))], timeout=WAIT_S)
            with pytest.raises(grpc.RpcError) as refused:
                next(call)
        assert error_from_rpc(refused.value).error is Errors.SASL_AUTHENTICATION_FAILED
        assert held_anchors(served.runtime) == 0
