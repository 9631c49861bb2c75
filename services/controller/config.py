"""`ControllerServiceConfig`: the controller process's configuration.

It extends the core's `ControllerConfig` (the broker keys the controller's logic reads, such as
`auto.leader.rebalance.enable` or `delete.topic.enable`) with what the process needs: its id,
listeners, ZooKeeper connection, metrics port, request timeout and the bounds of its queues.
Keys are Kafka's where Kafka has one; `controller.id` and the two `controller.*.capacity` keys are
Odradek's, since its controllers are processes of their own rather than brokers.
"""

from __future__ import annotations

from services.common.config import REQUIRED, ConfigType, at_least, setting
from services.common.security.authorizer import AuthorizerConfig
from services.common.security.tls import TlsConfig
from services.common.service import Listener, parse_listener
from services.common.zk.connect import ZkTlsConfig
from services.controller.state.config import ControllerConfig

DEFAULT_HOST = "127.0.0.1"


class ControllerServiceConfig(ControllerConfig, TlsConfig, AuthorizerConfig, ZkTlsConfig):
    controller_id: int = setting(
        ConfigType.INT, REQUIRED, at_least(0), doc="This controller's id (written to /controller)."
    )
    listeners: str = setting(
        ConfigType.STRING, "PLAINTEXT://:9093", doc="Where the ControllerService listens."
    )
    advertised_listeners: str | None = setting(
        ConfigType.STRING, None, doc="Where brokers and clients reach it (default: listeners)."
    )
    zookeeper_connect: str = setting(ConfigType.STRING, REQUIRED, doc="ZooKeeper connect string.")
    zookeeper_session_timeout_ms: int = setting(
        ConfigType.INT, 18000, at_least(1000), doc="ZooKeeper session timeout."
    )
    zookeeper_connection_timeout_ms: int | None = setting(
        ConfigType.INT, None, doc="How long to wait for the first connection (default: the session timeout)."
    )
    metrics_port: int = setting(ConfigType.INT, -1, doc="Prometheus endpoint port; -1 disables it.")
    request_timeout_ms: int = setting(
        ConfigType.INT,
        30000,
        at_least(1),
        doc="How long an RPC waits for the event thread when the request carries no timeout.",
    )
    num_io_threads: int = setting(ConfigType.INT, 8, at_least(1), doc="gRPC worker threads.")
    controller_event_queue_capacity: int = setting(
        ConfigType.INT, 10000, at_least(1), doc="Events the controller queues before callers wait."
    )
    controller_broker_request_queue_capacity: int = setting(
        ConfigType.INT,
        1000,
        at_least(1),
        doc="Requests queued for one broker; beyond it requests to that broker are dropped and logged.",
    )

    @property
    def listener(self) -> Listener:
        return parse_listener(self.listeners.split(",")[0])

    def advertised_listener(self, bound_port: int = 0) -> Listener:
        """Where others reach this controller: advertised.listeners, else listeners, with a host
        (127.0.0.1 when none is given) and the bound port when the configured one is 0."""
        listener = parse_listener((self.advertised_listeners or self.listeners).split(",")[0])
        host = listener.host or DEFAULT_HOST
        port = listener.port or bound_port
        return Listener(listener.protocol, host, port)

    @property
    def connection_timeout_s(self) -> float:
        timeout_ms = self.zookeeper_connection_timeout_ms
        return (self.zookeeper_session_timeout_ms if timeout_ms is None else timeout_ms) / 1000
