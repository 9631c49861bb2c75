"""Expiring a ZooKeeper session on the server, as a long stall or a network partition would."""

from __future__ import annotations

import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

ATTEMPT_TIMEOUT_S = 5.0


def expire_session(connect_string: str, victim: KazooClient, timeout_s: float = 30.0) -> None:
    """Expires `victim`'s session: a twin connection takes the session over and closes it. The victim
    may win the connection back before the twin's close is sent, so this goes on until a twin that
    asks for the session is given a new one (the old one is gone)."""
    session_id, password = victim.client_id
    deadline = time.monotonic() + timeout_s
    while True:
        twin = KazooClient(hosts=connect_string, client_id=(session_id, password))
        try:
            twin.start(timeout=ATTEMPT_TIMEOUT_S)
            expired = twin.client_id[0] != session_id
            twin.stop()
            if expired:
                return
        except (KazooException, KazooTimeoutError):
            pass  # the victim took the connection back first: try again
        finally:
            twin.close()
        if time.monotonic() > deadline:
            raise TimeoutError(f"session 0x{session_id:x} did not expire within {timeout_s} s")
