"""Controller events the service adds to the core's (`state.events`): ZooKeeper notifications the
core has no event of its own for. They go through the same `ControllerEventManager`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from services.controller.state.events import ControllerEvent, ControllerState


@dataclass(frozen=True)
class ConfigChangeNotification(ControllerEvent):
    """Children of `/config/changes` changed: some topics' config overrides were altered (the
    controller cares about `unclean.leader.election.enable`)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE
