"""Process helpers and the shared service runtime: pid handling, deadlines, listeners, health."""

from __future__ import annotations

import gc
import socket
import sys
import weakref

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.service import ServiceRuntime, freeze_started_heap, node_channel, parse_listener, run_service
from services.common.zk.errors import DuplicateRegistrationError
from services.devcluster.proc import (
    free_port,
    listen_port_range,
    pid_alive,
    process_cmdline,
    read_pid_file,
    running_pid_from_file,
    start_process,
    stop_pid,
    stop_process,
    wait_until,
    write_pid_file,
)


def test_wait_until_returns_value_or_times_out():
    calls = []
    assert wait_until(lambda: calls.append(1) or len(calls) >= 3 and "done", 5, 0.001) == "done"
    with pytest.raises(TimeoutError, match="the moon"):
        wait_until(lambda: False, 0.05, 0.01, message=lambda: "the moon")


def test_free_ports_are_distinct_bindable_and_never_ephemeral():
    ephemeral_low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(port in listen_port_range() and port < ephemeral_low for port in ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", ports[0]))


def test_child_stopped_by_pid_even_when_it_ignores_sigterm(tmp_path):
    script = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\n" \
             "while True: time.sleep(1)\n"
    log = tmp_path / "child.log"
    child = start_process([sys.executable, "-c", script], log)
    try:
        wait_until(lambda: log.exists() and "up" in log.read_text(), 10, message="child to start")
        assert pid_alive(child.pid)
        assert stop_pid(child.pid, timeout_s=0.3)
        assert not pid_alive(child.pid)
    finally:
        assert stop_process(child) == -9


def test_pid_files_ignore_reused_pids(tmp_path):
    child = start_process([sys.executable, "-c", "import signal; signal.pause()"], tmp_path / "c.log")
    try:
        pid_file = tmp_path / "c.pid"
        write_pid_file(pid_file, child.pid)
        assert read_pid_file(pid_file) == child.pid
        # until the child has exec'd, its command line is empty and any expectation is taken as met
        wait_until(lambda: process_cmdline(child.pid), 10, message="the child's command line")
        assert running_pid_from_file(pid_file, expect_in_cmdline="signal.pause()") == child.pid
        assert running_pid_from_file(pid_file, expect_in_cmdline="something-else") is None
    finally:
        stop_process(child)
    assert running_pid_from_file(pid_file) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("PLAINTEXT://127.0.0.1:9092", ("PLAINTEXT", "127.0.0.1", 9092)),
        ("PLAINTEXT://:9093", ("PLAINTEXT", "", 9093)),
        ("localhost:8080", ("PLAINTEXT", "localhost", 8080)),
        ("plaintext://[::1]:9094", ("PLAINTEXT", "::1", 9094)),
    ],
)
def test_parse_listener(text, expected):
    listener = parse_listener(text)
    assert (listener.protocol, listener.host, listener.port) == expected


def test_parse_listener_needs_a_port():
    with pytest.raises(ValueError):
        parse_listener("PLAINTEXT://host")


def test_the_started_heap_is_frozen_after_its_garbage_is_collected():
    class Cycle:
        def __init__(self):
            self.me = self

    try:
        survivor, garbage = Cycle(), Cycle()
        garbage_ref = weakref.ref(garbage)
        del garbage
        assert freeze_started_heap() == gc.get_freeze_count() > 0
        assert garbage_ref() is None  # collected before the freeze
        assert not any(obj is survivor for obj in gc.get_objects())  # frozen: no generation holds it
    finally:
        gc.unfreeze()


def test_runtime_serves_health_and_runs_shutdown_hooks_in_order():
    runtime = ServiceRuntime("probe", "127.0.0.1:0")
    port = runtime.start()
    order = []
    runtime.on_shutdown("first", lambda: order.append("first"))
    runtime.on_shutdown("broken", lambda: 1 / 0)
    runtime.on_shutdown("last", lambda: order.append("last"))
    channel = node_channel(f"127.0.0.1:{port}")
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="probe")
        assert stub.Check(request, timeout=5).status == health_pb2.HealthCheckResponse.NOT_SERVING
        runtime.set_serving(True)
        assert stub.Check(request, timeout=5).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        channel.close()
        runtime.shutdown(grace_s=0.1)
    assert order == ["first", "last"]
    assert runtime.stopping


def test_runtime_still_serves_while_its_shutdown_hooks_run():
    runtime = ServiceRuntime("probe", "127.0.0.1:0")
    port = runtime.start()
    runtime.set_serving(True)
    channel = node_channel(f"127.0.0.1:{port}")
    seen = []

    def hook():
        stub = health_pb2_grpc.HealthStub(channel)
        seen.append(stub.Check(health_pb2.HealthCheckRequest(service="probe"), timeout=5).status)

    runtime.on_shutdown("probe the health service", hook)
    try:
        runtime.shutdown(grace_s=0.1)
    finally:
        channel.close()
    assert seen == [health_pb2.HealthCheckResponse.NOT_SERVING]


class _Config:
    node_id = 7

    @classmethod
    def load(cls, *_sources):
        return cls()


class _AlreadyRegisteredServer:
    def __init__(self, _config) -> None:
        pass

    def run(self) -> None:
        raise DuplicateRegistrationError("broker 7 is still registered at /brokers/ids/7")


def test_a_service_whose_id_is_held_by_a_live_process_exits_with_the_error(monkeypatch, caplog):
    monkeypatch.setattr("services.common.service.configure_logging", lambda _name: None)
    code = run_service("broker", "test", _Config, _AlreadyRegisteredServer, "node_id", argv=[])
    assert code == 1
    assert "DUPLICATE_BROKER_REGISTRATION (101): broker 7 is still registered" in caplog.text
