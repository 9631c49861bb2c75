"""Python clients of Odradek: Producer, Consumer, Admin and the `odradek` command line.

`from services.clients import Producer, Consumer, Admin, TopicPartition, ...` works for every name
of `services.clients.api`; they are imported on first use, so the command line starts quickly.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(name)
    api = importlib.import_module("services.clients.api")
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'services.clients' has no attribute {name!r}")
