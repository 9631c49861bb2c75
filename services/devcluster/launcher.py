"""The local cluster launcher behind `odradek dev up|down|status|start|stop|restart|kill`, `make up`
and the test fixtures.

`LocalCluster(base_dir)` lays a whole cluster out under one directory:

    <base_dir>/zookeeper/        ZooKeeper's data, zoo.cfg, zookeeper.log, zookeeper.pid
    <base_dir>/config/<name>.properties   each service's config (Kafka's keys)
    <base_dir>/data/<name>/      each broker's log.dirs
    <base_dir>/logs/<name>.log   each service's stdout and stderr
    <base_dir>/run/<name>.pid    each service's pid
    <base_dir>/cluster.json      the layout: names, ports, endpoints (read back by down/status)

Controllers start first, then brokers, then coordinators (which reach `__consumer_offsets` through
the brokers), then HTTP gateways (clients of the brokers; serving once `/health` answers 200).
Services run as `python -m services.<kind> --config <file>` in their own sessions, so they outlive
the launcher until `stop()`; everything is stopped by its own pid. One service is started, stopped,
restarted or killed by name (`start_service`, `stop_service`, `restart_service`, `kill_service`),
with the config it was laid out with; `add_broker` lays out one more broker to start. With
`zookeeper_connect` the cluster uses an existing ensemble (the tests share one) instead of
starting ZooKeeper. A `secure` cluster's own ZooKeeper serves TLS only, which every service and
the administrator connect to with their certificates (`zookeeper_tls`, on by default then).

With `network` (a created `HostNetwork` whose hosts are `ZOOKEEPER_HOST` and every service name,
see `hosts_for`), each service and ZooKeeper runs inside its own network namespace
(`ip netns exec <ns> ...`) and binds and advertises its host's address (listeners, Kafka listeners,
metrics, ZooKeeper's client port, the connect strings and bootstrap lists derived from them) on the
fixed port scheme; the root namespace reaches them through the run's bridge. The layout records the
network, so `load` gets it back and `odradek dev down` tears it down. `service_env[name]` adds
environment variables to one service's next start (a skewed clock: libfaketime's `LD_PRELOAD` and
`FAKETIME`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from services.common.health import check_health, http_ready
from services.common.security.tls import TlsSettings
from services.common.zk.client import OdradekZkClient
from services.common.zk.connect import ZkClientTls, zk_client
from services.devcluster import secure as secure_layout
from services.devcluster.netns import HostNetwork
from services.devcluster.proc import (
    free_port,
    log_tail,
    pid_alive,
    running_pid_from_file,
    start_process,
    stop_pid,
    wait_until,
    write_pid_file,
)
from services.devcluster.zookeeper import ZooKeeperServer, running_pid, stop_detached

BROKER_BASE_PORT = 9092
KAFKA_BASE_PORT = 19092  # a broker's Kafka protocol listener (broker-1: 19092, broker-2: 19192)
COORDINATOR_KAFKA_BASE_PORT = 19094  # a coordinator's (coordinator-2001: 19094, coordinator-2002: 19194)
CONTROLLER_BASE_PORT = 9093
COORDINATOR_BASE_PORT = 9094
PORT_STRIDE = 100
ZOOKEEPER_PORT = 2181
CONTROLLER_ID_BASE = 1000
COORDINATOR_ID_BASE = 2000
GATEWAY_BASE_PORT = 8080
METRICS_PORT_OFFSET = 10  # a gRPC service's metrics port is its own + 10 (broker-1: 9102)
ZOOKEEPER_HOST = "zookeeper"  # ZooKeeper's host name on a `HostNetwork`


@dataclass
class ServiceSpec:
    """One service process of the cluster."""

    name: str
    kind: str  # "broker", "controller", "coordinator" or "gateway"
    node_id: int
    port: int
    config: dict[str, str] = field(default_factory=dict)
    metrics_port: int = -1  # the Prometheus endpoint (`metrics.port`) of a gRPC service
    kafka_port: int = -1  # a broker's or coordinator's Kafka protocol listener (`kafka.listeners`)

    @property
    def module(self) -> str:
        return f"services.{self.kind}"


class LocalCluster:
    """ZooKeeper plus controllers, brokers and coordinators as local processes under one directory."""

    def __init__(
        self,
        base_dir: Path | str,
        *,
        brokers: int = 3,
        controllers: int = 2,
        coordinators: int = 0,
        gateways: int = 0,
        host: str = "127.0.0.1",
        free_ports: bool = False,
        zookeeper_connect: str | None = None,
        zookeeper_chroot: str = "",
        broker_config: dict[str, object] | None = None,
        controller_config: dict[str, object] | None = None,
        coordinator_config: dict[str, object] | None = None,
        gateway_config: dict[str, object] | None = None,
        env: dict[str, str] | None = None,
        network: HostNetwork | None = None,
        kafka_security_protocol: str = "PLAINTEXT",
        secure: bool = False,
        zookeeper_tls: bool | None = None,
    ):
        self.base_dir = Path(base_dir).resolve()
        self.secure = secure  # TLS everywhere, mutual between services, ACLs on (`secure`)
        # ZooKeeper's own port over TLS too: by default when secured and ZooKeeper is this cluster's
        if zookeeper_tls and (not secure or zookeeper_connect is not None):
            raise ValueError("ZooKeeper over TLS needs secure=True and the cluster's own ZooKeeper")
        self.zookeeper_tls = secure and zookeeper_connect is None if zookeeper_tls is None else zookeeper_tls
        # of every Kafka listener: or SASL_PLAINTEXT; SASL_SSL when secured
        secured_default = secure and kafka_security_protocol == "PLAINTEXT"
        self.kafka_security_protocol = secure_layout.KAFKA_SECURITY_PROTOCOL if secured_default \
            else kafka_security_protocol
        self.network = network
        if network is not None:  # every host has its own address: the fixed ports never clash
            host, free_ports = network.root_address, False
        self.host = host
        self.external_zookeeper = zookeeper_connect
        self.zookeeper_chroot = zookeeper_chroot
        self.env = {**os.environ, **(env or {})}
        self.service_env: dict[str, dict[str, str]] = {}
        self.zookeeper: ZooKeeperServer | None = None
        self._zk_port = free_port(host) if free_ports else ZOOKEEPER_PORT
        self.free_ports = free_ports
        port, metrics_port = self._port, self._metrics_port
        self.services: dict[str, ServiceSpec] = {}
        for index in range(controllers):
            node_id = CONTROLLER_ID_BASE + index + 1
            self._add(ServiceSpec(f"controller-{node_id}", "controller", node_id,
                                  port(CONTROLLER_BASE_PORT, index), _stringify(controller_config),
                                  metrics_port(CONTROLLER_BASE_PORT, index)))
        for index in range(brokers):
            self._add(self._broker_spec(index + 1, _stringify(broker_config)))
        internal_replication = min(3, brokers)  # the internal topics wait for this many live brokers
        coordinator_config = {"offsets.topic.replication.factor": internal_replication,
                              "transaction.state.log.replication.factor": internal_replication,
                              **(coordinator_config or {})}
        for index in range(coordinators):
            node_id = COORDINATOR_ID_BASE + index + 1
            self._add(ServiceSpec(f"coordinator-{node_id}", "coordinator", node_id,
                                  port(COORDINATOR_BASE_PORT, index), _stringify(coordinator_config),
                                  metrics_port(COORDINATOR_BASE_PORT, index),
                                  port(COORDINATOR_KAFKA_BASE_PORT, index)))
        for index in range(gateways):
            self._add(ServiceSpec(f"gateway-{index + 1}", "gateway", index + 1,
                                  port(GATEWAY_BASE_PORT, index), _stringify(gateway_config)))

    def _port(self, base: int, index: int) -> int:
        return free_port(self.host) if self.free_ports else base + PORT_STRIDE * index

    def _metrics_port(self, base: int, index: int) -> int:
        return self._port(base + METRICS_PORT_OFFSET, index)

    def _broker_spec(self, node_id: int, config: dict[str, str]) -> ServiceSpec:
        index = node_id - 1
        return ServiceSpec(f"broker-{node_id}", "broker", node_id, self._port(BROKER_BASE_PORT, index), config,
                           self._metrics_port(BROKER_BASE_PORT, index), self._port(KAFKA_BASE_PORT, index))

    def _add(self, spec: ServiceSpec) -> None:
        self.services[spec.name] = spec

    def add_broker(self) -> str:
        """Lays out one more broker, the next id, configured as the others (its ports free ones, or
        the fixed scheme's; on a network, a host of its own), and rewrites the layout; returns its
        name (start it with `start_service`)."""
        brokers = [self.services[name] for name in self.broker_names]
        node_id = max((spec.node_id for spec in brokers), default=0) + 1
        config = dict(brokers[-1].config) if brokers else {}
        if self.network is not None:
            self.network.add_host(f"broker-{node_id}")
        self._add(self._broker_spec(node_id, config))
        self.write_layout()
        return f"broker-{node_id}"

    # ------------------------------------------------------------------ layout

    @property
    def zookeeper_connect(self) -> str:
        connect = self.external_zookeeper or f"{self.host_of(ZOOKEEPER_HOST)}:{self._zk_port}"
        return connect + self.zookeeper_chroot

    def host_of(self, name: str) -> str:
        """The address service `name` (or `ZOOKEEPER_HOST`) binds: its own host's on a network."""
        return self.host if self.network is None else self.network.address(name)

    def endpoint(self, name: str) -> str:
        return f"{self.host_of(name)}:{self.services[name].port}"

    @property
    def broker_names(self) -> list[str]:
        return [n for n, s in self.services.items() if s.kind == "broker"]

    @property
    def controller_names(self) -> list[str]:
        return [n for n, s in self.services.items() if s.kind == "controller"]

    @property
    def coordinator_names(self) -> list[str]:
        return [n for n, s in self.services.items() if s.kind == "coordinator"]

    @property
    def gateway_names(self) -> list[str]:
        return [n for n, s in self.services.items() if s.kind == "gateway"]

    def gateway_url(self, name: str = "gateway-1") -> str:
        return f"{'https' if self.secure else 'http'}://{self.endpoint(name)}"

    def metrics_url(self, name: str) -> str | None:
        """Where the service's Prometheus metrics are served (a gateway's on its own port), or None
        when its `metrics.port` is -1."""
        if self.services[name].kind == "gateway":
            return f"{self.gateway_url(name)}/metrics"
        port = int(self.service_config(name).get("metrics.port", -1))
        return f"http://{self.host_of(name)}:{port}/metrics" if port >= 0 else None

    @property
    def all_names(self) -> list[str]:
        """Every service, in start order."""
        return self.controller_names + self.broker_names + self.coordinator_names + self.gateway_names

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.endpoint(n) for n in self.broker_names)

    @property
    def kafka_bootstrap_servers(self) -> str:
        """The brokers' Kafka protocol listeners, for Kafka clients."""
        return ",".join(f"{self.host_of(n)}:{self.services[n].kafka_port}" for n in self.broker_names
                        if self.services[n].kafka_port >= 0)

    def broker_name(self, broker_id: int) -> str:
        return f"broker-{broker_id}"

    def log_path(self, name: str) -> Path:
        return self.base_dir / "logs" / f"{name}.log"

    def pid_path(self, name: str) -> Path:
        return self.base_dir / "run" / f"{name}.pid"

    def data_dir(self, name: str) -> Path:
        return self.base_dir / "data" / name

    def config_path(self, name: str) -> Path:
        return self.base_dir / "config" / f"{name}.properties"

    def service_config(self, name: str) -> dict[str, str]:
        spec, host = self.services[name], self.host_of(name)
        if spec.kind == "gateway":
            security = secure_layout.gateway_settings(self.base_dir, name) if self.secure else {}
            return {"gateway.id": str(spec.node_id),
                    "listeners": f"{'https' if self.secure else 'http'}://{host}:{spec.port}",
                    "bootstrap.servers": self.bootstrap_servers, "zookeeper.connect": self.zookeeper_connect,
                    **security, **self.zookeeper_client_settings(name), **spec.config}
        config = {
            "listeners": f"{'SSL' if self.secure else 'PLAINTEXT'}://{host}:{spec.port}",
            "zookeeper.connect": self.zookeeper_connect,
            "metrics.port": str(spec.metrics_port),
        }
        if spec.kafka_port >= 0:
            config["kafka.listeners"] = f"{self.kafka_security_protocol}://{host}:{spec.kafka_port}"
        if spec.kind == "broker":
            config["broker.id"] = str(spec.node_id)
            config["log.dirs"] = str(self.data_dir(name))
        elif spec.kind == "coordinator":
            config["coordinator.id"] = str(spec.node_id)
            config["bootstrap.servers"] = self.bootstrap_servers
        else:
            config["controller.id"] = str(spec.node_id)
        if self.secure:
            config.update(secure_layout.service_settings(self.base_dir, name, self.all_names))
        config.update(self.zookeeper_client_settings(name))
        config.update(spec.config)
        return config

    def zookeeper_client_settings(self, name: str) -> dict[str, str]:
        """The `zookeeper.ssl.*` keys service `name` connects to ZooKeeper with (empty: plaintext)."""
        return secure_layout.zookeeper_client_settings(self.base_dir, name) if self.zookeeper_tls else {}

    @property
    def admin_zk_tls(self) -> ZkClientTls | None:
        """What the administrator connects to this cluster's ZooKeeper with (None: plaintext)."""
        return secure_layout.zookeeper_client_tls(self.base_dir) if self.zookeeper_tls else None

    def write_layout(self) -> None:
        (self.base_dir / "config").mkdir(parents=True, exist_ok=True)
        for name in self.services:
            lines = [f"{k}={v}" for k, v in sorted(self.service_config(name).items())]
            self.config_path(name).write_text("\n".join(lines) + "\n")
        layout = {
            "host": self.host,
            "zookeeper": {"connect": self.zookeeper_connect, "port": self._zk_port,
                          "external": self.external_zookeeper},
            "services": {name: asdict(spec) for name, spec in self.services.items()},
            "free_ports": self.free_ports,
            "secure": self.secure,
            "zookeeper_tls": self.zookeeper_tls,
            "network": None if self.network is None else self.network.to_dict(),
        }
        (self.base_dir / "cluster.json").write_text(json.dumps(layout, indent=2) + "\n")

    @classmethod
    def load(cls, base_dir: Path | str) -> LocalCluster:
        """The cluster described by `<base_dir>/cluster.json` (to stop it or show its status)."""
        base = Path(base_dir).resolve()
        layout = json.loads((base / "cluster.json").read_text())
        network = HostNetwork.from_dict(layout["network"]) if layout.get("network") else None
        cluster = cls(base, brokers=0, controllers=0, host=layout["host"],
                      zookeeper_connect=layout["zookeeper"]["external"], free_ports=layout.get("free_ports", False),
                      network=network, secure=layout.get("secure", False),
                      zookeeper_tls=layout.get("zookeeper_tls", False))
        cluster._zk_port = layout["zookeeper"]["port"]
        if layout["zookeeper"]["external"]:
            cluster.zookeeper_chroot = layout["zookeeper"]["connect"][len(layout["zookeeper"]["external"]):]
        for spec in layout["services"].values():
            cluster._add(ServiceSpec(**spec))
        return cluster

    # ------------------------------------------------------------------ processes

    def start(self, timeout_s: float = 60.0) -> LocalCluster:
        """Starts ZooKeeper (unless external), every controller, broker and coordinator; waits
        until each answers its gRPC health check as SERVING."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if self.secure:
            secure_layout.make_certificates(self.base_dir, {
                **{name: self.host_of(name) for name in self.all_names},
                secure_layout.ZOOKEEPER_IDENTITY: self.host_of(ZOOKEEPER_HOST)})
        if self.zookeeper_tls:
            secure_layout.write_zookeeper_tls_config(self.base_dir)
        self.write_layout()
        if self.external_zookeeper is None:
            zookeeper_dir = self.base_dir / "zookeeper"
            if running_pid(zookeeper_dir) is None:
                tls = secure_layout.zookeeper_server_tls(self.base_dir) if self.zookeeper_tls else None
                self.zookeeper = ZooKeeperServer(zookeeper_dir, self._zk_port, self.host_of(ZOOKEEPER_HOST),
                                                 command_prefix=self.exec_prefix(ZOOKEEPER_HOST),
                                                 tls=tls).start(timeout_s)
        try:
            if self.secure:
                self._add_admin_user()
            for name in self.all_names:
                self.start_service(name, wait=False)
            for name in self.all_names:
                self.wait_serving(name, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def start_service(self, name: str, *, wait: bool = True, timeout_s: float = 60.0) -> int:
        if self.running_pid(name) is not None:
            raise RuntimeError(f"{name} is already running")
        self.data_dir(name).mkdir(parents=True, exist_ok=True)
        argv = [*self.exec_prefix(name), sys.executable, "-m", self.services[name].module,
                "--config", str(self.config_path(name))]
        process = start_process(argv, self.log_path(name), env={**self.env, **self.service_env.get(name, {})},
                                cwd=Path(__file__).resolve().parents[2])
        write_pid_file(self.pid_path(name), process.pid)
        if wait:
            self.wait_serving(name, timeout_s)
        return process.pid

    def exec_prefix(self, name: str) -> list[str]:
        """What runs a command on service `name`'s host: nothing on loopback."""
        return [] if self.network is None else self.network.exec_prefix(name)

    def running_pid(self, name: str) -> int | None:
        return running_pid_from_file(self.pid_path(name), expect_in_cmdline=str(self.config_path(name)))

    def is_serving(self, name: str) -> bool:
        if self.services[name].kind == "gateway":
            return http_ready(f"{self.gateway_url(name)}/health",
                              cafile=str(secure_layout.ca_path(self.base_dir)) if self.secure else None)
        return check_health(self.endpoint(name), timeout_ms=1000, tls=self.admin_tls)

    @property
    def admin_tls(self) -> TlsSettings | None:
        """The administrator's TLS identity on a secured cluster (None otherwise)."""
        if not self.secure:
            return None
        settings = self.client_settings()
        return TlsSettings.load(settings["ssl.key.location"], settings["ssl.ca.location"],
                                certificate_location=settings["ssl.certificate.location"])

    def client_settings(self) -> dict[str, str]:
        """Kafka client keys that reach this cluster as its administrator (empty: no security)."""
        return secure_layout.client_settings(self.base_dir) if self.secure else {}

    def _add_admin_user(self) -> None:
        zk = zk_client(self.zookeeper_connect, self.admin_zk_tls)
        zk.start(timeout=30)
        try:
            client = OdradekZkClient(zk)
            client.ensure_paths()
            secure_layout.add_admin_scram_user(client)
        finally:
            zk.stop()
            zk.close()

    def wait_serving(self, name: str, timeout_s: float = 60.0) -> None:
        def ready() -> bool:
            if self.running_pid(name) is None:
                raise RuntimeError(f"{name} exited while starting:\n{log_tail(self.log_path(name), 40)}")
            return self.is_serving(name)

        wait_until(ready, timeout_s, 0.1,
                   message=lambda: f"{name} to serve:\n{log_tail(self.log_path(name), 40)}")

    def signal_service(self, name: str, signum: int) -> int:
        """Sends a signal (SIGKILL, SIGSTOP, SIGCONT, ...) to a service by its pid."""
        pid = self.running_pid(name)
        if pid is None:
            raise RuntimeError(f"{name} is not running")
        os.kill(pid, signum)
        if signum == signal.SIGKILL:
            wait_until(lambda: not pid_alive(pid), 10, message=f"{name} (pid {pid}) to die")
        return pid

    def kill_service(self, name: str) -> int:
        return self.signal_service(name, signal.SIGKILL)

    def stop_service(self, name: str, timeout_s: float = 30.0) -> bool:
        pid = self.running_pid(name)
        stopped = pid is not None and stop_pid(pid, timeout_s)
        self.pid_path(name).unlink(missing_ok=True)
        return stopped

    def restart_service(self, name: str, timeout_s: float = 60.0) -> int:
        """Stops `name` (SIGTERM, waiting for it to exit; SIGKILL after `timeout_s`), starts it again
        with its config and waits until it serves; returns the new pid."""
        self.stop_service(name, timeout_s)
        return self.start_service(name, timeout_s=timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stops gateways, coordinators, brokers (controlled shutdown), then controllers, then
        ZooKeeper if ours."""
        for name in self.gateway_names + self.coordinator_names + self.broker_names + self.controller_names:
            try:
                self.stop_service(name, timeout_s)
            except TimeoutError:
                pass
        if self.zookeeper is not None:
            self.zookeeper.stop()
        elif self.external_zookeeper is None:
            stop_detached(self.base_dir / "zookeeper")

    def status(self) -> dict[str, dict[str, object]]:
        rows = {}
        for name in self.all_names:
            pid = self.running_pid(name)
            rows[name] = {"pid": pid, "endpoint": self.endpoint(name), "metrics": self.metrics_url(name),
                          "serving": pid is not None and self.is_serving(name),
                          "log": str(self.log_path(name))}
        return rows

    def dump_logs(self, max_lines: int = 60) -> str:
        """The tail of every service log (for failing tests)."""
        parts = []
        for name in self.all_names:
            path = self.log_path(name)
            parts.append(f"----- {name} ({path}) -----\n{log_tail(path, max_lines)}")
        if self.zookeeper is not None:
            parts.append(f"----- zookeeper -----\n{log_tail(self.zookeeper.log_path, 20)}")
        return "\n".join(parts)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def hosts_for(controllers: int, brokers: int, coordinators: int, gateways: int) -> list[str]:
    """The host names of a `HostNetwork` for a cluster of this shape (ZooKeeper first, then the
    services as `LocalCluster` names them)."""
    return ([ZOOKEEPER_HOST] + [f"controller-{CONTROLLER_ID_BASE + i + 1}" for i in range(controllers)]
            + [f"broker-{i + 1}" for i in range(brokers)]
            + [f"coordinator-{COORDINATOR_ID_BASE + i + 1}" for i in range(coordinators)]
            + [f"gateway-{i + 1}" for i in range(gateways)])


def _stringify(config: dict[str, object] | None) -> dict[str, str]:
    out = {}
    for key, value in (config or {}).items():
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out
