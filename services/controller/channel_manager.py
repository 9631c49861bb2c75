"""`ControllerChannelManager`: the active controller's connections to live brokers (Kafka's
ControllerChannelManager and RequestSendThread).

One `RequestSendThread` per live broker takes requests from a bounded queue and sends them one
at a time over its own gRPC channel with a deadline (`controller.socket.timeout.ms`). A call that
fails UNAVAILABLE or DEADLINE_EXCEEDED is retried after a short backoff for as long as the
broker stays live; any other failure is logged and the request dropped. A full queue drops the
new request with an error log (the broker is not keeping up; its ZooKeeper session decides its
fate). `update_brokers` follows the controller's live brokers: a new broker gets a sender, a
gone one loses it (queued requests are dropped, an in-flight call is cancelled), and a broker
that registered again (new epoch or endpoint) gets a fresh one.

Answers go to `on_response(effect, response)` on the sender's thread; it must only enqueue.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from services.common.pb.odradek.broker.v1 import broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.security.tls import TlsSettings
from services.common.service import node_channel
from services.common.shared_types import BrokerInfo
from services.controller.broker_requests import broker_address, request_for
from services.controller.state.effects import BrokerRequest

logger = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
RETRIABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

OnResponse = Callable[[BrokerRequest, Any], None]
# address -> (BrokerService stub, close function)
Connect = Callable[[str], tuple[Any, Callable[[], None]]]


def grpc_connect(address: str, tls: TlsSettings | None = None) -> tuple[Any, Callable[[], None]]:
    channel = node_channel(address, tls)
    return broker_pb2_grpc.BrokerServiceStub(channel), channel.close


@dataclass(frozen=True, slots=True)
class BrokerTarget:
    """What a sender is bound to: a broker's id, address and registration epoch."""

    broker_id: int
    address: str
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class QueuedRequest:
    method: str
    request: Any
    effect: BrokerRequest


class RequestSendThread(threading.Thread):
    def __init__(
        self,
        target: BrokerTarget,
        connect: Connect,
        capacity: int,
        timeout_s: float,
        on_response: OnResponse,
        retry_backoff_s: float = RETRY_BACKOFF_S,
    ) -> None:
        super().__init__(name=f"controller-request-send-thread-{target.broker_id}", daemon=True)
        self.target = target
        self._stub, self._close = connect(target.address)
        self._queue: queue.Queue[QueuedRequest | None] = queue.Queue(maxsize=capacity)
        self._timeout_s = timeout_s
        self._on_response = on_response
        self._retry_backoff_s = retry_backoff_s
        self._stopped = threading.Event()

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    def offer(self, item: QueuedRequest) -> bool:
        """Queue a request; False when the queue is full."""
        try:
            self._queue.put_nowait(item)
            return True
        except queue.Full:
            return False

    def shutdown(self) -> None:
        """Stop after (cancelling) the current call; queued requests are dropped."""
        self._stopped.set()
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass
        self._close()

    def run(self) -> None:
        while not self._stopped.is_set():
            item = self._queue.get()
            if item is None or self._stopped.is_set():
                return
            try:
                self._send(item)
            except Exception:
                logger.exception("Sending %s to broker %d failed", item.method, self.target.broker_id)

    def _send(self, item: QueuedRequest) -> None:
        call = getattr(self._stub, item.method)
        while not self._stopped.is_set():
            try:
                response = call(item.request, timeout=self._timeout_s)
            except grpc.RpcError as e:
                code = e.code() if hasattr(e, "code") else None
                if code in RETRIABLE_CODES and not self._stopped.is_set():
                    logger.debug(
                        "Retrying %s to broker %d after %s", item.method, self.target.broker_id, code
                    )
                    self._stopped.wait(self._retry_backoff_s)
                    continue
                if not self._stopped.is_set():
                    logger.warning(
                        "%s to broker %d failed (%s); dropping it", item.method, self.target.broker_id, code
                    )
                return
            self._on_response(item.effect, response)
            return


class ControllerChannelManager:
    def __init__(
        self,
        controller_id: int,
        controller_node: common_pb2.Node,
        cluster_id: str,
        *,
        request_timeout_ms: int,
        queue_capacity: int,
        on_response: OnResponse,
        connect: Connect = grpc_connect,
        retry_backoff_s: float = RETRY_BACKOFF_S,
    ) -> None:
        self._controller_id = controller_id
        self._controller_node = controller_node
        self._cluster_id = cluster_id
        self._timeout_s = request_timeout_ms / 1000
        self._capacity = queue_capacity
        self._on_response = on_response
        self._connect = connect
        self._retry_backoff_s = retry_backoff_s
        self._senders: dict[int, RequestSendThread] = {}
        self._lock = threading.Lock()

    @property
    def broker_ids(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._senders)

    @property
    def queue_size(self) -> int:
        with self._lock:
            return sum(s.queue_size for s in self._senders.values())

    def update_brokers(self, brokers: Iterable[BrokerInfo]) -> None:
        """Keep one sender per live broker: add new ones, drop gone ones, renew re-registered ones."""
        wanted: dict[int, BrokerTarget] = {}
        for broker in brokers:
            address = broker_address(broker)
            if address is None:
                logger.warning("Broker %d registered no listener; not connecting", broker.broker_id)
                continue
            wanted[broker.broker_id] = BrokerTarget(broker.broker_id, address, broker.broker_epoch)
        with self._lock:
            for broker_id in list(self._senders):
                if self._senders[broker_id].target != wanted.get(broker_id):
                    self._remove(broker_id)
            for broker_id, target in wanted.items():
                if broker_id not in self._senders:
                    self._add(target)

    def send(self, requests: Iterable[BrokerRequest]) -> None:
        with self._lock:
            for effect in requests:
                sender = self._senders.get(effect.broker_id)
                if sender is None:
                    logger.warning(
                        "No channel to broker %d; dropping %r", effect.broker_id, type(effect).__name__
                    )
                    continue
                method, request = request_for(
                    effect, self._controller_id, self._controller_node, self._cluster_id
                )
                if not sender.offer(QueuedRequest(method, request, effect)):
                    logger.error(
                        "Request queue of broker %d is full (%d); dropping %s",
                        effect.broker_id,
                        self._capacity,
                        method,
                    )

    def shutdown(self) -> None:
        """Drop every sender (on resignation and shutdown)."""
        with self._lock:
            for broker_id in list(self._senders):
                self._remove(broker_id)

    def _add(self, target: BrokerTarget) -> None:
        sender = RequestSendThread(
            target, self._connect, self._capacity, self._timeout_s, self._on_response, self._retry_backoff_s
        )
        self._senders[target.broker_id] = sender
        sender.start()
        logger.info("Added request send thread for broker %d at %s", target.broker_id, target.address)

    def _remove(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id)
        sender.shutdown()
        logger.info("Removed request send thread for broker %d", broker_id)
