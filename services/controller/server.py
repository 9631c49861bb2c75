"""`ControllerServer`: assembles one controller process and runs its lifecycle.

Start: the gRPC runtime (ControllerService + health; a standby is SERVING too and answers
NOT_CONTROLLER), the ZooKeeper session, Kafka's persistent paths, the cluster id, then the event
thread, the watch bridge and a Startup event, which runs the election. A controller restarted
after being killed while active first waits for `/controller` of its previous process to go
(`previous_session`), so it never takes that stale znode for its own. Shutdown (SIGTERM): stop
the scheduler and the event thread (queued callers are answered NOT_CONTROLLER), resign, close
the ZooKeeper session (which removes `/controller`, so a standby takes over at once).

Broker answers arrive on the channel manager's sender threads: StopReplica answers for topic
deletion become events; LeaderAndIsr and UpdateMetadata errors are logged.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from services.common.errors import Errors
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2_grpc
from services.common.security.authorizer import node_authorizer
from services.common.security.grpc_credentials import node_password_verifier
from services.common.service import ServiceRuntime, listener_tls
from services.common.zk import OdradekZkClient
from services.common.zk.client import close_session
from services.common.zk.connect import zk_client
from services.controller.broker_requests import (
    leader_and_isr_storage_error_event,
    partition_errors,
    stop_replica_deletion_event,
)
from services.controller.channel_manager import ControllerChannelManager, grpc_connect
from services.controller.config import ControllerServiceConfig
from services.controller.metrics import ControllerMetrics
from services.controller.processor import ControllerEventProcessor
from services.controller.scheduler import EventScheduler
from services.controller.servicer import ControllerGateway, ControllerServicer
from services.controller.state.core import ControllerCore
from services.controller.state.effects import BrokerRequest, SendLeaderAndIsr, SendStopReplica
from services.controller.state.event_manager import ControllerEventManager
from services.controller.state.events import ControllerEvent, Startup
from services.controller.topic_configs import TopicConfigAdmin
from services.controller.view import ControllerView
from services.controller.watches import WatchBridge
from services.controller.zk_reader import ClusterReader

logger = logging.getLogger(__name__)


EVENT_THREAD_STOP_TIMEOUT_S = 30.0


class ControllerServer:
    def __init__(self, config: ControllerServiceConfig) -> None:
        self.config = config
        self.controller_id = config.controller_id
        self.runtime = ServiceRuntime(
            "controller",
            config.listener.address,
            max_workers=config.num_io_threads,
            metrics_port=config.metrics_port,
            tls=listener_tls(config.listener, config),
        )
        self.zk_raw = zk_client(
            config.zookeeper_connect, config.zk_tls(), timeout_s=config.zookeeper_session_timeout_ms / 1000
        )
        self.zk = OdradekZkClient(self.zk_raw)
        self.core = ControllerCore(config, self.controller_id)
        self.events = ControllerEventManager(self._process, capacity=config.controller_event_queue_capacity)
        self.bridge = WatchBridge(self.events)
        self.scheduler = EventScheduler(self.events.put)
        self.processor: ControllerEventProcessor | None = None
        self.metrics: ControllerMetrics | None = None
        self.endpoint = ""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> int:
        unclean = "true" if self.config.unclean_leader_election_enable else "false"
        configs = TopicConfigAdmin(self.zk, {"unclean.leader.election.enable": unclean})
        gateway = ControllerGateway(self.events, self.view, self.config.request_timeout_ms)
        self.runtime.add_servicer(
            controller_pb2_grpc.add_ControllerServiceServicer_to_server, ControllerServicer(gateway, configs)
        )
        port = self.runtime.start()
        advertised = self.config.advertised_listener(port)
        self.endpoint = f"{advertised.host}:{advertised.port}"

        self.zk_raw.add_listener(self.bridge.on_session_state)
        self.zk_raw.start(timeout=self.config.connection_timeout_s)
        # a lost connection or an expired session while starting is waited out, as the broker does
        self.zk.until_connected(self.zk.ensure_paths)
        self.runtime.authorizer = node_authorizer(self.config, self.zk_raw)
        self.runtime.password_verifier = node_password_verifier(self.zk, None)
        self.zk.await_previous_controller_session(self.controller_id, self.config.zookeeper_session_timeout_ms)
        cluster_id = self.zk.until_connected(self.zk.get_or_create_cluster_id)
        controller_node = common_pb2.Node(
            node_id=self.controller_id, host=advertised.host, port=advertised.port
        )
        channels = ControllerChannelManager(
            self.controller_id,
            controller_node,
            cluster_id,
            request_timeout_ms=self.config.controller_socket_timeout_ms,
            queue_capacity=self.config.controller_broker_request_queue_capacity,
            on_response=self._on_broker_response,
            connect=functools.partial(grpc_connect, tls=self.runtime.tls),
        )
        self.processor = ControllerEventProcessor(
            controller_id=self.controller_id,
            endpoint=self.endpoint,
            cluster_id=cluster_id,
            config=self.config,
            core=self.core,
            zk=self.zk,
            reader=ClusterReader(self.zk, self.bridge.watch),
            channels=channels,
            scheduler=self.scheduler,
            session_id=self._session_id,
        )
        self.metrics = ControllerMetrics(self.controller_id, self.view, lambda: self.events.queue_size)
        self.bridge.start()
        self.events.start()
        self.events.put(Startup())
        self.runtime.on_shutdown("controller", self._shutdown_controller)
        self.runtime.on_shutdown("close ZooKeeper", self._close_zookeeper)
        self.runtime.set_serving(True)
        logger.info(
            "Controller %d serving at %s (cluster %s, ZooKeeper %s)",
            self.controller_id,
            self.endpoint,
            cluster_id,
            self.config.zookeeper_connect,
        )
        return port

    def run(self) -> None:
        self.start()
        self.runtime.run_until_stopped()

    def view(self) -> ControllerView:
        if self.processor is None:
            return ControllerView(self.controller_id)
        return self.processor.view

    # ------------------------------------------------------------------ plumbing

    def _process(self, event: ControllerEvent) -> None:
        if self.processor is None:
            event.preempt()
            return
        self.processor.process(event)

    def _session_id(self) -> int:
        client_id = self.zk_raw.client_id
        return client_id[0] if client_id else -1

    def _on_broker_response(self, effect: BrokerRequest, response: Any) -> None:
        """On a sender thread: only enqueue (topic deletion, replicas in offline log dirs) or log."""
        if isinstance(effect, SendStopReplica):
            event = stop_replica_deletion_event(effect, response)
            if event is not None:
                self.events.put(event)
            return
        if isinstance(effect, SendLeaderAndIsr):
            event = leader_and_isr_storage_error_event(effect, response)
            if event is not None:
                self.events.put(event)
        errors = {str(p): code for p, code in partition_errors(response).items() if code}
        # a partition whose leader epoch the broker already has is answered STALE_CONTROLLER_EPOCH
        # (Kafka's behaviour); that is expected after a failover and not worth a warning
        unexpected = {p: code for p, code in errors.items() if code != Errors.STALE_CONTROLLER_EPOCH}
        kind = "LeaderAndIsr" if isinstance(effect, SendLeaderAndIsr) else "UpdateMetadata"
        if response.error_code or unexpected:
            logger.warning(
                "%s to broker %d failed: error %d %s, partitions %s",
                kind,
                effect.broker_id,
                response.error_code,
                getattr(response, "error_message", ""),
                errors,
            )
        elif errors:
            logger.debug("%s to broker %d: partitions already up to date: %s", kind, effect.broker_id, errors)

    def _shutdown_controller(self) -> None:
        self.scheduler.close()
        stopped = self.events.close(EVENT_THREAD_STOP_TIMEOUT_S)
        if self.processor is not None:
            if stopped:
                self.processor.shutdown()
            else:
                logger.error("The controller event thread did not stop; shutting down without resigning")
                self.processor.channels.shutdown()
        self.bridge.close()
        if self.metrics is not None:
            self.metrics.close()

    def _close_zookeeper(self) -> None:
        close_session(self.zk_raw)
