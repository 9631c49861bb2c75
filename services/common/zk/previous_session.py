"""Waiting out the ZooKeeper session of a service's previous process.

A service killed without a clean shutdown (SIGKILL, a crash, a lost host) leaves its ephemeral
znodes behind until ZooKeeper expires its session, up to the session timeout later: a broker's
`/brokers/ids/<id>`, a coordinator's `/coordinators/ids/<id>`, an active controller's `/controller`
(which names its id). A process restarted under the same id within that window finds its own
registration held by the old session. Kafka 2.8's broker fails there (NodeExists, or
DUPLICATE_BROKER_REGISTRATION); Odradek's services wait instead, once, before they register:

    waited_ms = await_previous_session(kazoo, "/brokers/ids/1", "broker 1", session_timeout_ms)

returns at once when the znode is absent, belongs to this process's own session, or (with
`names_us`, for a znode several ids compete for, as `/controller`) stands for another id.
Otherwise it logs that it waits, watches the znode, rereads it on every notification and every
`RECHECK_INTERVAL_MS`, and returns the milliseconds it waited once the znode is gone. The wait is
bounded by the session timeout plus `EXPIRY_MARGIN_MS` (ZooKeeper expires sessions on its tick,
and may have negotiated a longer timeout): a znode still held after that belongs to a live
process with the same id, and DuplicateRegistrationError says so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.zk.errors import DuplicateRegistrationError

logger = logging.getLogger(__name__)

EXPIRY_MARGIN_MS = 5000
RECHECK_INTERVAL_MS = 1000


def wait_bound_ms(session_timeout_ms: int) -> int:
    """How long a previous session may take to expire: its timeout plus `EXPIRY_MARGIN_MS`."""
    return session_timeout_ms + EXPIRY_MARGIN_MS


def await_previous_session(zk: KazooClient, path: str, what: str, session_timeout_ms: int, *,
                           names_us: Callable[[bytes], bool] = lambda _data: True,
                           clock: Clock = SYSTEM_CLOCK) -> int:
    """Blocks until `path` is not held for `what` by another ZooKeeper session; returns the
    milliseconds waited. DuplicateRegistrationError when it is still held after
    `wait_bound_ms(session_timeout_ms)`."""
    bound_ms = wait_bound_ms(session_timeout_ms)
    started_ms = clock.monotonic_ms()
    waiting = False
    while True:
        gone = threading.Event()
        holder = _other_holder(zk, path, names_us, gone)
        waited_ms = clock.monotonic_ms() - started_ms
        if holder is None:
            if waiting:
                logger.info("The previous session of %s is gone after %d ms", what, waited_ms)
            return waited_ms
        if not waiting:
            waiting = True
            logger.warning("%s is still registered at %s by ZooKeeper session 0x%x; waiting up to %d ms "
                           "for the previous session of %s to expire", what, path, holder, bound_ms, what)
        if waited_ms >= bound_ms:
            raise DuplicateRegistrationError(
                f"{what} is still registered at {path} by ZooKeeper session 0x{holder:x} after waiting "
                f"{waited_ms} ms (session timeout {session_timeout_ms} ms): another process with this id "
                f"is running")
        gone.wait(min(bound_ms - waited_ms, RECHECK_INTERVAL_MS) / 1000)


def _other_holder(zk: KazooClient, path: str, names_us: Callable[[bytes], bool],
                  gone: threading.Event) -> int | None:
    """The session holding `path` for this service when it is not this process's own; None when
    there is none. `gone` is set when the znode changes or goes (the watch does nothing else)."""
    try:
        data, stat = zk.get(path, watch=lambda _event: gone.set())
    except NoNodeError:
        return None
    own_session = zk.client_id[0] if zk.client_id else None
    if not stat.ephemeralOwner or stat.ephemeralOwner == own_session or not names_us(data):
        return None
    return stat.ephemeralOwner
