"""The errors of the ZooKeeper data layer.

`ControllerMovedError` is Kafka's ControllerMovedException: a write fenced by the
`/controller_epoch` version failed because another controller was elected since. Kafka maps it to
STALE_CONTROLLER_EPOCH (11); a controller that sees it resigns, and its RPC handlers answer
NOT_CONTROLLER (41) from then on.
"""

from __future__ import annotations

from services.common.errors import Errors, KafkaError, StartupRefusedError


class ControllerMovedError(KafkaError):
    error = Errors.STALE_CONTROLLER_EPOCH


class DuplicateRegistrationError(StartupRefusedError):
    """An ephemeral registration znode exists and belongs to another ZooKeeper session."""

    error = Errors.DUPLICATE_BROKER_REGISTRATION


class ZnodeFormatError(ValueError):
    """A znode's data does not have the shape its owning module documents."""
