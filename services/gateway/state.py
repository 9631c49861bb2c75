"""`GatewayState`: what one gateway process shares among its requests, owned by the app's lifespan.

One `Admin` and one idempotent `Producer` per process (the producer batches records of concurrent
requests together, as one Kafka client per process should), the metrics, and the consumer-instance
registry of `routes.consumers_v2`. Routes reach it with `Depends(gateway_state)`. The clients are
blocking: routes call them through `blocking(...)`, which runs them on the threadpool and bounds the
wait by `request.timeout.ms` (a cluster that is down is answered 5xx, never a hung request).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from services.clients.admin import Admin
from services.clients.producer import Producer
from services.common.errors import Errors, KafkaError
from services.gateway.config import GatewayConfig
from services.gateway.metrics import GatewayMetrics

T = TypeVar("T")


@dataclass
class GatewayState:
    config: GatewayConfig
    admin: Admin
    producer: Producer
    metrics: GatewayMetrics
    base_url: str  # http://host:port this process is reached at (consumer instances' base_uri)
    worker_index: int = 0
    extensions: dict[str, Any] = field(default_factory=dict)  # per route module: its own registries

    @property
    def request_timeout_s(self) -> float:
        return self.config.request_timeout_ms / 1000

    async def blocking(self, call: Callable[..., T], *args: Any, timeout_s: float | None = None,
                       **kwargs: Any) -> T:
        """`call(*args, **kwargs)` on the threadpool, within `timeout_s` (`request.timeout.ms`);
        REQUEST_TIMED_OUT past it."""
        limit = self.request_timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(run_in_threadpool(functools.partial(call, *args, **kwargs)), limit)
        except TimeoutError:
            raise KafkaError(f"no answer from the cluster within {limit:g} s",
                             error=Errors.REQUEST_TIMED_OUT) from None


def gateway_state(request: Request) -> GatewayState:
    """The process's GatewayState (a FastAPI dependency)."""
    return request.app.state.gateway


State = Annotated[GatewayState, Depends(gateway_state)]  # a route's parameter of the process's state
