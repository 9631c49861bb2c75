"""Running local processes: start a child in its own session with its output in a log file, poll a
condition with a deadline, stop a process by its pid (SIGTERM, then SIGKILL), pid files, free ports.

The development launcher and the integration tests start ZooKeeper and the services through these
helpers, so a process is always stopped by its own pid and never by matching names.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


EPHEMERAL_RANGE_PATH = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_PORT_SPAN = 12_000
_handed_out_ports: set[int] = set()


LISTEN_PORTS_ENV = "ODRADEK_LISTEN_PORTS"  # "low-high": the ports local clusters choose from


def listen_port_range() -> range:
    """Ports below the kernel's ephemeral range: no outgoing connection is ever given one, so a
    port chosen here stays free until its service binds it, and again when the service restarts.
    `ODRADEK_LISTEN_PORTS=low-high` narrows it, so processes that start clusters side by side never
    choose one another's ports."""
    narrowed = os.environ.get(LISTEN_PORTS_ENV)
    if narrowed:
        low, _, high = narrowed.partition("-")
        return range(int(low), int(high) + 1)
    try:
        ephemeral_low = int(EPHEMERAL_RANGE_PATH.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    high = max(ephemeral_low, 2048)
    return range(max(1024, high - LISTEN_PORT_SPAN), high)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` now, outside the ephemeral range, never handed out twice by
    this process (a cluster's ports are all chosen before its first service binds one)."""
    candidates = listen_port_range()
    for _ in range(len(candidates)):
        port = random.choice(candidates)
        if port in _handed_out_ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _handed_out_ports.add(port)
        return port
    raise RuntimeError(f"no free port on {host} in {candidates.start}-{candidates.stop - 1}")


def wait_until(
    predicate: Callable[[], T],
    timeout_s: float,
    interval_s: float = 0.05,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Poll `predicate` until it returns a truthy value, and return that value.

    Raises TimeoutError naming `message` (a string, or a callable evaluated at timeout so it can
    carry fresh detail such as a log tail) when `timeout_s` passes first. Exceptions raised by the
    predicate propagate at once.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            detail = message() if callable(message) else message
            raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {detail}")
        time.sleep(min(interval_s, remaining))


def start_process(
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session (its own process group) with stdout and stderr appended to
    `log_path` and stdin closed. The child outlives its parent unless stopped."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
        )


def start_python_module(
    module: str,
    args: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """`python -m module args...` with this interpreter, started as `start_process` does."""
    return start_process([sys.executable, "-m", module, *args], log_path, env=env, cwd=cwd)


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a live process; a zombie (exited, not yet reaped) counts as gone. Linux."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return process_state(pid) not in ("Z", "X")


def stop_pid(pid: int, timeout_s: float = 10.0, kill_timeout_s: float = 5.0) -> bool:
    """Stop process `pid`: SIGTERM, wait up to `timeout_s`, then SIGKILL and wait again.

    Returns False if it was not running. Raises TimeoutError if it survives SIGKILL. A child of
    ours is left unreaped, so its Popen still reports the real exit status.
    """
    if not pid_alive(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        wait_until(lambda: not pid_alive(pid), timeout_s, message=f"pid {pid} to exit after SIGTERM")
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(pid), kill_timeout_s, message=f"pid {pid} to exit after SIGKILL")
    return True


def stop_process(
    process: subprocess.Popen[bytes], timeout_s: float = 10.0, kill_timeout_s: float = 5.0
) -> int:
    """Stop a child started here by its pid (SIGTERM, then SIGKILL after `timeout_s`), reap it and
    return its exit status (negative: the signal that ended it)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(kill_timeout_s)
    return process.returncode


def process_cmdline(pid: int) -> list[str] | None:
    """The argument vector of `pid` from /proc, or None when it is gone or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def write_pid_file(path: Path, pid: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{pid}\n")
    tmp.replace(path)


def read_pid_file(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def running_pid_from_file(path: Path, expect_in_cmdline: str | None = None) -> int | None:
    """The pid recorded in `path` if that process is alive and, when `expect_in_cmdline` is given,
    its command line contains that string (so a reused pid is never mistaken for ours)."""
    pid = read_pid_file(path)
    if pid is None or not pid_alive(pid):
        return None
    if expect_in_cmdline is not None:
        argv = process_cmdline(pid)
        if argv == []:  # just forked, not yet exec'd: its command line is not there yet
            return pid
        if argv is None or not any(expect_in_cmdline in arg for arg in argv):
            return None
    return pid


def stop_pid_file(path: Path, timeout_s: float = 10.0, expect_in_cmdline: str | None = None) -> bool:
    """Stop the process recorded in pid file `path` (see `running_pid_from_file`) and remove the
    file. Returns whether a process was stopped."""
    pid = running_pid_from_file(path, expect_in_cmdline)
    stopped = pid is not None and stop_pid(pid, timeout_s)
    path.unlink(missing_ok=True)
    return stopped


def log_tail(path: Path | None, max_lines: int = 100) -> str:
    """The last `max_lines` lines of a text log, or a note saying it cannot be read."""
    if path is None:
        return "(no log)"
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 256 * max_lines))
            lines = log.read().decode(errors="replace").splitlines()
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(lines[-max_lines:])


def process_state(pid: int) -> str | None:
    """The state letter /proc gives `pid` (R running, S sleeping, T stopped, Z zombie, ...), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]
