"""What the admin and low-level clients share: their config, a channel pool and a metadata cache,
an operation's deadline, and closing the pool when done (`close()`, or leaving a `with` block)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from services.clients.client_config import AdminConfig, load_client_config
from services.clients.metadata import Metadata
from services.clients.transport import ChannelPool, Deadline
from services.common.clock import SYSTEM_CLOCK, Clock


class PooledClient:
    """A client built from `AdminConfig` keys (a mapping of dotted keys and/or snake_case overrides)."""

    # whether the metadata cache keeps tracking a topic answered UNKNOWN_TOPIC_OR_PARTITION
    keeps_unknown_topics = True

    def __init__(self, config: Mapping[str, Any] | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 **overrides: Any):
        self.config = load_client_config(AdminConfig, config, overrides)
        self.clock = clock
        self.pool = ChannelPool.from_config(self.config, clock)
        self.metadata = Metadata.from_config(self.config, keep_unknown_topics=self.keeps_unknown_topics, clock=clock)

    def _deadline(self, timeout_ms: float | None) -> Deadline:
        """An operation's deadline: `timeout_ms` from now, by default `default.api.timeout.ms`."""
        return Deadline(self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms, self.clock)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
