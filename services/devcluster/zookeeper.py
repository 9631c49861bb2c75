"""A standalone ZooKeeper server run from the Debian package's jars, for tests and `odradek dev up`.

`ZooKeeperServer(data_dir, port)` writes into `data_dir`:

    zoo.cfg            the server config (dataDir is `data_dir` itself; client port on `host` only)
    log4j.properties   logging to the console, which is captured in zookeeper.log
    zookeeper.log      the JVM's stdout and stderr
    zookeeper.pid      the server's pid while it runs

With `tls` (a `ZooKeeperTls`: PEM key store and trust store, which ZooKeeper 3.5.5+ reads as
`ssl.keyStore.type=PEM`), the server has no plaintext port: `port` is its `secureClientPort`, served
by Netty with client certificates required (`ssl.clientAuth=need`), and it is checked over TLS.

It runs `java ... org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg` (after `command_prefix`, e.g.
`ip netns exec <ns>` to run it on a host of a `HostNetwork`) in its own session, so it
keeps running after the process that started it exits. `start()` returns once the server answers the
`conf` four-letter word with its own dataDir; `stop()` signals its pid (SIGTERM, then SIGKILL). A
server left running is found and stopped later through its pid file with `running_pid(data_dir)` and
`stop_detached(data_dir)`.
"""

from __future__ import annotations

import shutil
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from services.devcluster.proc import (
    free_port,
    log_tail,
    running_pid_from_file,
    start_process,
    stop_pid_file,
    stop_process,
    wait_until,
    write_pid_file,
)

if TYPE_CHECKING:
    from subprocess import Popen

JAVA_DIR = Path("/usr/share/java")
# What a standalone server loads (checked with `java -verbose:class`); the rest of zookeeper.jar's
# manifest Class-Path (jetty, netty, jackson) serves only the admin server and Netty connections.
REQUIRED_JARS = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    "slf4j-log4j12.jar",
    "log4j-1.2.jar",
)
# Netty, for the TLS port (NettyServerCnxnFactory); from the Debian packages zookeeper depends on
NETTY_JARS = (
    "netty-handler.jar",
    "netty-transport.jar",
    "netty-buffer.jar",
    "netty-common.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
)
NETTY_SERVER_CNXN_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"
INSTALL_COMMAND = "apt-get install default-jre-headless zookeeper"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
CONFIG_NAME = "zoo.cfg"
LOG4J_NAME = "log4j.properties"
LOG_NAME = "zookeeper.log"
PID_NAME = "zookeeper.pid"

_LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
"""


class ZooKeeperNotInstalledError(RuntimeError):
    """Java or the ZooKeeper jars are missing; the message says what to install."""


class ZooKeeperStartError(RuntimeError):
    """The server process exited or never started serving; the message carries its log tail."""


@dataclass(frozen=True)
class ZooKeeperTls:
    """The server's TLS identity and trust (PEM files), and what it checks its port with: a client
    identity (`client_keystore`, key and chain in one PEM file), since every client needs one."""

    keystore: Path
    truststore: Path
    client_keystore: Path

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.truststore))
        context.check_hostname = False  # readiness only; services check the host name
        context.load_cert_chain(str(self.client_keystore))
        return context


def find_installation(java_dir: Path = JAVA_DIR, *, tls: bool = False) -> tuple[str, list[Path]]:
    """The java executable and the server's class path (with Netty for `tls`), or
    ZooKeeperNotInstalledError."""
    java = shutil.which("java")
    jars = [java_dir / name for name in (*REQUIRED_JARS, *(NETTY_JARS if tls else ()))]
    missing = ([] if java else ["java (not on PATH)"]) + [str(jar) for jar in jars if not jar.is_file()]
    if missing:
        raise ZooKeeperNotInstalledError(
            f"cannot run ZooKeeper, missing: {', '.join(missing)}. "
            f"Install Java and ZooKeeper with: {INSTALL_COMMAND} (as root, e.g. with sudo)"
        )
    return java, jars


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 1.0,
                     tls: ssl.SSLContext | None = None) -> str:
    """Send a four-letter-word command (`ruok`, `srvr`, `mntr`, ...) and return the whole answer;
    over TLS with context `tls`."""
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        sock = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
        try:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
        finally:
            if sock is not raw:
                sock.close()
    return b"".join(chunks).decode(errors="replace")


def running_pid(data_dir: Path) -> int | None:
    """The pid of a server running from `data_dir`, as its pid file and command line say."""
    return running_pid_from_file(data_dir / PID_NAME, expect_in_cmdline=str(_abs(data_dir) / CONFIG_NAME))


def stop_detached(data_dir: Path, timeout_s: float = 10.0) -> bool:
    """Stop the server running from `data_dir` by the pid in its pid file; False if none ran."""
    return stop_pid_file(data_dir / PID_NAME, timeout_s, expect_in_cmdline=str(_abs(data_dir) / CONFIG_NAME))


class ZooKeeperServer:
    """One standalone ZooKeeper server process; a context manager that starts and stops it."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        host: str = "127.0.0.1",
        tick_time_ms: int = 500,
        max_session_timeout_ms: int = 120_000,
        heap_mb: int = 256,
        force_sync: bool = False,
        java_dir: Path = JAVA_DIR,
        command_prefix: Sequence[str] = (),
        tls: ZooKeeperTls | None = None,
    ) -> None:
        self.data_dir = _abs(data_dir)
        self.host = host
        self.port = port if port else free_port(host)
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap_mb = heap_mb
        self.force_sync = force_sync
        self.java_dir = java_dir
        self.command_prefix = list(command_prefix)  # e.g. `ip netns exec <ns>`: where the server runs
        self.tls = tls
        self._port_fixed = bool(port)
        self._process: Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / CONFIG_NAME

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    @property
    def pid_path(self) -> Path:
        return self.data_dir / PID_NAME

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def config_text(self) -> str:
        if self.tls is None:
            ports: dict[str, object] = {"clientPort": self.port, "clientPortAddress": self.host}
        else:
            ports = {
                "secureClientPort": self.port,
                "secureClientPortAddress": self.host,
                "serverCnxnFactory": NETTY_SERVER_CNXN_FACTORY,
                "ssl.keyStore.location": self.tls.keystore,
                "ssl.keyStore.type": "PEM",
                "ssl.trustStore.location": self.tls.truststore,
                "ssl.trustStore.type": "PEM",
                "ssl.clientAuth": "need",
            }
        settings = {
            "tickTime": self.tick_time_ms,
            "dataDir": self.data_dir,
            **ports,
            "maxClientCnxns": 0,  # unlimited: every test client connects from 127.0.0.1
            "maxSessionTimeout": self.max_session_timeout_ms,
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
            "forceSync": "yes" if self.force_sync else "no",
            "preAllocSize": 4096,  # KiB per transaction log file, instead of 64 MiB
            "autopurge.snapRetainCount": 3,
            "autopurge.purgeInterval": 1,
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / LOG4J_NAME).write_text(_LOG4J_PROPERTIES)
        self.config_path.write_text(self.config_text())
        return self.config_path

    def command(self, java: str, jars: list[Path]) -> list[str]:
        return [
            *self.command_prefix,
            java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.data_dir / LOG4J_NAME}",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            ":".join(str(jar) for jar in jars),
            MAIN_CLASS,
            str(self.config_path),
        ]

    def is_serving(self) -> bool:
        """Whether this server (not some other one on the port: its dataDir is ours) serves."""
        try:
            tls = None if self.tls is None else self.tls.client_context()
            conf = four_letter_word(self.host, self.port, "conf", tls=tls).splitlines()
        except OSError:
            return False
        return f"dataDir={self.data_dir / 'version-2'}" in conf

    def start(self, timeout_s: float = 30.0) -> Self:
        """Start the server and wait until it serves; a free port is retried if it was taken."""
        java, jars = find_installation(self.java_dir, tls=self.tls is not None)
        if (other := running_pid(self.data_dir)) is not None:
            raise ZooKeeperStartError(f"a ZooKeeper server (pid {other}) already runs from {self.data_dir}")
        for attempt in range(1, 4):
            try:
                return self._launch(java, jars, timeout_s)
            except ZooKeeperStartError as exc:
                if self._port_fixed or attempt == 3 or "Address already in use" not in str(exc):
                    raise
                self.port = free_port(self.host)
        raise AssertionError("unreachable")

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._process is None:
            return
        stop_process(self._process, timeout_s)
        self._process = None
        self.pid_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self if self._process is not None else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _launch(self, java: str, jars: list[Path], timeout_s: float) -> Self:
        self.write_config()
        self._process = start_process(self.command(java, jars), self.log_path, cwd=self.data_dir)
        write_pid_file(self.pid_path, self._process.pid)
        process, pid = self._process, self._process.pid

        def serving() -> bool:
            if process.poll() is not None:
                tail = log_tail(self.log_path)
                raise ZooKeeperStartError(f"ZooKeeper (pid {pid}) exited on startup:\n{tail}")
            return self.is_serving()

        try:
            wait_until(serving, timeout_s, interval_s=0.1, message=lambda: self._describe_failure(pid))
        except TimeoutError as exc:
            self.stop()
            raise ZooKeeperStartError(str(exc)) from None
        except BaseException:
            self.stop()
            raise
        return self

    def _describe_failure(self, pid: int) -> str:
        return f"ZooKeeper (pid {pid}) to serve on {self.connect_string}:\n{log_tail(self.log_path)}"


def _abs(path: Path) -> Path:
    return Path(path).resolve()
