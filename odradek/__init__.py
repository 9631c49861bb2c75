"""Odradek's Python clients: the names applications import.

    from odradek import Producer, Consumer, Admin, NewTopic, TopicPartition

`__all__` is every name of `services.clients.api` (the clients, their configuration, the value
types they take and return); each is imported on first use, so `import odradek` costs nothing
until a client is used. Beside them:

- `odradek.errors`: Kafka's error codes (`Errors`) and the exceptions the clients raise;
- `odradek.spark`: the Spark data source, format `odradek`, and `register(spark)` (needs the
  `spark` extra, `pip install 'odradek[spark]'`; only this module imports PySpark);
- `odradek.legacy`: the Kafka 0.8 high-level consumer, with group membership in ZooKeeper.

Everything under `services` is the services' and the clients' internals, and may change.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and editors see; at run time each name comes on first use
    from services.clients.api import *  # noqa: F403

PUBLIC_API = "services.clients.api"


def _api() -> ModuleType:
    return importlib.import_module(PUBLIC_API)


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return list(_api().__all__)
    if not name.startswith("_") and name in _api().__all__:
        return getattr(_api(), name)
    raise AttributeError(f"module 'odradek' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_api().__all__})
