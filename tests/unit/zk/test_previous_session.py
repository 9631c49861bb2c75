"""Waiting out a previous process's session: free at once, waited for, bounded, and the znodes
that are no reason to wait (this session's own, another controller's `/controller`)."""

from __future__ import annotations

import pytest
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from services.common.clock import ManualClock
from services.common.errors import Errors
from services.common.zk import controller
from services.common.zk.controller import ControllerInfo
from services.common.zk.errors import DuplicateRegistrationError
from services.common.zk.previous_session import EXPIRY_MARGIN_MS, await_previous_session, wait_bound_ms

OWN_SESSION = 0x100
OLD_SESSION = 0x0FF
PATH = "/brokers/ids/1"
SESSION_TIMEOUT_MS = 6000


class FakeKazoo:
    """One znode held by `owner`. Every read takes `read_ms` of the clock and, unless the znode is
    left alone (`quiet`), its watch fires right after it (the znode changed), so nothing waits in
    real time; the previous session expires (the znode goes) at the read `expires_at_read`."""

    def __init__(self, clock: ManualClock, owner: int | None, data: bytes = b"{}", *,
                 read_ms: int = 0, expires_at_read: int | None = None, quiet: bool = False) -> None:
        self.clock = clock
        self.owner = owner
        self.data = data
        self.read_ms = read_ms
        self.expires_at_read = expires_at_read
        self.quiet = quiet
        self.reads = 0
        self.client_id = (OWN_SESSION, b"password")

    def get(self, path: str, watch=None):
        assert path == PATH
        self.reads += 1
        self.clock.advance(self.read_ms)
        if self.owner is None:
            raise NoNodeError(path)
        stat = ZnodeStat(1, 1, 0, 0, 0, 0, 0, self.owner, len(self.data), 0, 1)
        if self.reads == self.expires_at_read:
            self.owner = None
        if not self.quiet:
            watch(None)
        return self.data, stat


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_an_absent_znode_is_free_at_once(clock):
    assert await_previous_session(FakeKazoo(clock, None), PATH, "broker 1", SESSION_TIMEOUT_MS, clock=clock) == 0


def test_a_znode_of_this_session_is_free(clock):
    zk = FakeKazoo(clock, OWN_SESSION, quiet=True)
    assert await_previous_session(zk, PATH, "broker 1", SESSION_TIMEOUT_MS, clock=clock) == 0
    assert zk.reads == 1


def test_it_waits_until_the_previous_session_expires(clock, caplog):
    zk = FakeKazoo(clock, OLD_SESSION, read_ms=1500, expires_at_read=3)
    caplog.set_level("INFO")

    waited_ms = await_previous_session(zk, PATH, "broker 1", SESSION_TIMEOUT_MS, clock=clock)

    assert waited_ms == 4 * 1500 and zk.reads == 4
    assert (f"waiting up to {SESSION_TIMEOUT_MS + EXPIRY_MARGIN_MS} ms for the previous session of broker 1 "
            "to expire") in caplog.text
    assert "The previous session of broker 1 is gone after 6000 ms" in caplog.text


def test_a_znode_held_past_the_bound_is_a_duplicate_registration(clock):
    bound_ms = wait_bound_ms(SESSION_TIMEOUT_MS)
    zk = FakeKazoo(clock, OLD_SESSION, read_ms=bound_ms // 2)   # a live process: it never goes

    with pytest.raises(DuplicateRegistrationError) as raised:
        await_previous_session(zk, PATH, "broker 1", SESSION_TIMEOUT_MS, clock=clock)

    assert raised.value.code == Errors.DUPLICATE_BROKER_REGISTRATION
    assert "broker 1 is still registered at /brokers/ids/1 by ZooKeeper session 0xff" in str(raised.value)
    assert "another process with this id is running" in str(raised.value)
    assert zk.reads == 2


def test_another_controller_in_the_znode_is_no_reason_to_wait(clock):
    other = controller.encode_controller(ControllerInfo(1002, 0, "ctl-2:9093"))
    zk = FakeKazoo(clock, OLD_SESSION, other, quiet=True)

    assert await_previous_session(zk, PATH, "controller 1001", SESSION_TIMEOUT_MS, clock=clock,
                                  names_us=lambda data: controller.decode_controller(data).controller_id == 1001) == 0

