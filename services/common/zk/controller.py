"""The active controller: `/controller` (ephemeral) and `/controller_epoch` (persistent).

`/controller` is Kafka's version 1 plus Odradek's `endpoint`, the active controller's RPC address
(Odradek's controllers are processes of their own, not brokers). `brokerid` is the controller's id;
`timestamp` is milliseconds as a string:

    {"version":1,"brokerid":1,"timestamp":"1620000000000","endpoint":"ctl-1:9093"}

Readers ignore unknown fields and accept Kafka's own znode, which has no `endpoint`.

`/controller_epoch` is a plain decimal integer (`3`), created as `0` before the first election and
incremented by each election in the same transaction that creates `/controller`. Its data version
(the epoch zk version) is what every controller write checks: see `fencing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from services.common.zk.codec import as_int, decode_int, dumps, encode_int, loads_object
from services.common.zk.codec import field as required

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    controller_id: int
    timestamp_ms: int = 0
    endpoint: str | None = None


class ControllerEpoch(NamedTuple):
    """The controller epoch and the data version of `/controller_epoch` that holds it."""

    epoch: int
    zk_version: int


def encode_controller(info: ControllerInfo) -> bytes:
    obj: dict[str, object] = {
        "version": 1,
        "brokerid": info.controller_id,
        "timestamp": str(info.timestamp_ms),
    }
    if info.endpoint is not None:
        obj["endpoint"] = info.endpoint
    return dumps(obj)


def decode_controller(data: bytes | None) -> ControllerInfo:
    obj = loads_object(data, CONTROLLER_PATH)
    timestamp = obj.get("timestamp")
    endpoint = obj.get("endpoint")
    return ControllerInfo(
        controller_id=as_int(required(obj, "brokerid", CONTROLLER_PATH), CONTROLLER_PATH),
        timestamp_ms=as_int(timestamp, CONTROLLER_PATH) if timestamp is not None else 0,
        endpoint=str(endpoint) if endpoint is not None else None,
    )


def encode_controller_epoch(epoch: int) -> bytes:
    return encode_int(epoch)


def decode_controller_epoch(data: bytes | None) -> int:
    return decode_int(data, CONTROLLER_EPOCH_PATH)
