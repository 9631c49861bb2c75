"""`ZkAccess`, the base of `OdradekZkClient`: the started kazoo client, the clock for timestamps,
and the read, watch, pipelining and ephemeral-registration helpers the operations share.

Watches: a `watch` argument is passed straight to kazoo, which calls it on its own thread with a
`WatchedEvent`. It must only enqueue the event (see `watches.enqueue_watch`) for the service's
single-threaded event loop, as Kafka's ControllerEventManager does; it is one-shot, so the loop
re-registers it when it rereads. Nothing here does work inside a watch callback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from services.common.clock import Clock, SystemClock
from services.common.zk.codec import Versioned
from services.common.zk.errors import DuplicateRegistrationError, ZnodeFormatError
from services.common.zk.fencing import FencedTransaction, ZkTransaction

Watch = Callable[[WatchedEvent], None]
K = TypeVar("K")
T = TypeVar("T")
logger = logging.getLogger(__name__)
EPHEMERAL_CREATE_ATTEMPTS = 5
# between the attempts of `until_connected`: from the first delay, doubling up to the longest
UNTIL_CONNECTED_FIRST_DELAY_S = 0.1
UNTIL_CONNECTED_LONGEST_DELAY_S = 1.0


class ZkAccess:
    def __init__(self, zk: KazooClient, clock: Clock | None = None):
        self.zk = zk
        self.clock = clock or SystemClock()

    def until_connected(self, call: Callable[..., T], *args: object, **kwargs: object) -> T:
        """`call(*args, **kwargs)`, made again after each connection loss, operation timeout or
        session expiry until it succeeds, as Kafka's retryRequestsUntilConnected: kazoo reconnects
        (with a new session after an expiry) meanwhile. Only for calls that are safe to repeat:
        reads, ensures, and creates that reread when the znode exists. A stopped client ends it."""
        retry = KazooRetry(max_tries=-1, delay=UNTIL_CONNECTED_FIRST_DELAY_S,
                           max_delay=UNTIL_CONNECTED_LONGEST_DELAY_S, ignore_expire=True,
                           sleep_func=self.zk.handler.sleep_func)
        return retry(call, *args, **kwargs)

    def transaction(self) -> ZkTransaction:
        return ZkTransaction(self.zk)

    def fenced(self, epoch_zk_version: int) -> FencedTransaction:
        """A transaction for a controller write, applied only while the controller is current."""
        return FencedTransaction(self.zk, epoch_zk_version)

    def _write(self, epoch_zk_version: int | None) -> ZkTransaction:
        return self.transaction() if epoch_zk_version is None else self.fenced(epoch_zk_version)

    def _get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat] | None:
        """Data and stat, or None if absent. A watch is set with `exists`, so it also fires when
        an absent znode is created (Kafka's registerZNodeChangeHandlerAndCheckExistence)."""
        if watch is not None and self.zk.exists(path, watch=watch) is None:
            return None
        try:
            return self.zk.get(path)
        except NoNodeError:
            return None

    def _children(self, path: str, watch: Watch | None = None) -> list[str]:
        """Child names, sorted; [] if the znode is absent (a watch then waits for its creation)."""
        try:
            return sorted(self.zk.get_children(path, watch=watch))
        except NoNodeError:
            if watch is not None and self.zk.exists(path, watch=watch) is not None:
                return self._children(path, watch)
            return []

    def _get_many(self, keyed_paths: Iterable[tuple[K, str]]) -> dict[K, tuple[bytes, ZnodeStat]]:
        """Reads pipelined (all requests sent before any answer is awaited); absent znodes omitted."""
        pending = [(key, self.zk.get_async(path)) for key, path in keyed_paths]
        found: dict[K, tuple[bytes, ZnodeStat]] = {}
        for key, result in pending:
            try:
                found[key] = result.get()
            except NoNodeError:
                continue
        return found

    @staticmethod
    def _decode_each(
        found: Mapping[K, tuple[bytes, ZnodeStat]], decode: Callable[[K, bytes], T]
    ) -> dict[K, Versioned[T]]:
        """Each read znode decoded with its version. One that does not have its documented shape
        is logged and left out, so that a bad znode of one topic does not stop reading the others."""
        decoded: dict[K, Versioned[T]] = {}
        for key, (data, stat) in found.items():
            try:
                decoded[key] = Versioned(decode(key, data), stat.version)
            except ZnodeFormatError as exc:
                logger.error("Skipping a znode that cannot be decoded: %s", exc)
        return decoded

    def _delete_each_fenced(self, paths: Iterable[str], epoch_zk_version: int) -> None:
        """Deletes each path in its own fenced transaction, pipelined; absent paths are skipped."""
        pending = []
        for path in paths:
            tx = self.fenced(epoch_zk_version).delete(path)
            pending.append((tx, tx.commit_async()))
        for tx, result in pending:
            try:
                tx.outcome(result.get())
            except NoNodeError:
                continue

    def _register_ephemeral(self, path: str, data: bytes, what: str) -> ZnodeStat:
        """Creates an ephemeral znode (and its parents) and returns its stat, whose czxid is the
        registration epoch. If it exists and belongs to this session (a registration retried after
        a lost connection), that one is returned; if it belongs to another session,
        DuplicateRegistrationError (Kafka's CheckedEphemeral)."""
        for _ in range(EPHEMERAL_CREATE_ATTEMPTS):
            try:
                return self.zk.create(path, data, ephemeral=True, makepath=True, include_data=True)[1]
            except NodeExistsError:
                stat = self.zk.exists(path)
            if stat is None:
                continue
            if stat.ephemeralOwner == self.zk.client_id[0]:
                return stat
            raise DuplicateRegistrationError(
                f"{what} is already registered at {path} by ZooKeeper session 0x{stat.ephemeralOwner:x}"
            )
        raise RuntimeError(f"{path} kept appearing and vanishing; {what} not registered")
