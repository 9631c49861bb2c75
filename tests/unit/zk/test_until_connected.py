"""Start-up ZooKeeper calls wait out a lost connection or an expired session, as Kafka's
retryRequestsUntilConnected, and fail at once on anything else."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, NoAuthError, SessionExpiredError

from services.common.zk.client import OdradekZkClient


class Flaky:
    """Raises `failures` in turn, then answers; counts its calls."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self, *args: object) -> tuple[object, ...]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return args


def client(sleeps: list[float]) -> OdradekZkClient:
    return OdradekZkClient(SimpleNamespace(handler=SimpleNamespace(sleep_func=sleeps.append)))


def test_a_call_is_made_again_after_connection_losses_and_a_session_expiry_until_it_answers():
    # a broker stopped (SIGSTOP) while it started: its session expired during `ensure_paths`
    sleeps: list[float] = []
    call = Flaky(ConnectionLoss(), ConnectionLoss(), SessionExpiredError(), ConnectionLoss())
    assert client(sleeps).until_connected(call, "/brokers/ids") == ("/brokers/ids",)
    assert call.calls == 5 and len(sleeps) == 4 and max(sleeps) <= 1.0 + 0.4  # the longest delay, jittered


@pytest.mark.parametrize("error", [NoAuthError(), ConnectionClosedError("stopped")])
def test_another_error_or_a_stopped_client_ends_it_at_once(error):
    call = Flaky(error)
    with pytest.raises(type(error)):
        client([]).until_connected(call)
    assert call.calls == 1
