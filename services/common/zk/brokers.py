"""Broker registrations: `/brokers/ids/<id>` (ephemeral) and `/brokers/seqid`.

`/brokers/ids/<id>` is written by the broker itself when its ZooKeeper session starts and vanishes
with the session. The broker epoch is the znode's creation zxid (`stat.czxid`), so it grows with
every registration. Kafka 2.8 writes version 5:

    {"version":5,"host":"h1","port":9092,"endpoints":["PLAINTEXT://h1:9092"],
     "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"rack":"r1","jmx_port":-1,
     "timestamp":"1620000000000","features":{}}

`host`/`port` repeat the first PLAINTEXT endpoint for old clients (null and -1 if there is none);
`rack` is omitted when the broker has none; `timestamp` is milliseconds as a string; `features`
maps a feature name to {"min_version": n, "max_version": m}. Versions 1 to 4 are read too (version
1 has only host and port; versions 2 and 3 have no protocol map, so listener names are protocols).

`/brokers/seqid` holds no data; its data version is the last generated broker sequence id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from services.common.zk.codec import as_int, dumps, loads_object
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQID_PATH = "/brokers/seqid"
CURRENT_VERSION = 5
PLAINTEXT = "PLAINTEXT"

_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One advertised listener: `PLAINTEXT://host:port`. An empty host means the default interface."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = PLAINTEXT

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: dict[str, str] | None = None) -> EndPoint:
        match = _ENDPOINT.match(text)
        if match is None:
            raise ZnodeFormatError(f"unable to parse {text!r} as a broker endpoint")
        listener = match.group(1).upper()
        protocol = (protocol_map or {}).get(listener, listener if protocol_map is None else None)
        if protocol is None:
            raise ZnodeFormatError(f"no security protocol defined for listener {listener}")
        return cls(listener, match.group(2), int(match.group(3)), protocol)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What a broker registers; the broker epoch is not part of it (it is the znode's czxid)."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0
    features: dict[str, dict[str, int]] = field(default_factory=dict)
    version: int = CURRENT_VERSION

    def endpoint(self, listener_name: str = PLAINTEXT) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


@dataclass(frozen=True, slots=True)
class BrokerAndEpoch:
    broker: BrokerInfo
    epoch: int


def encode_broker(info: BrokerInfo) -> bytes:
    plain = next((e for e in info.endpoints if e.security_protocol == PLAINTEXT), None)
    obj: dict[str, object] = {
        "version": info.version,
        "host": (plain.host or None) if plain else None,
        "port": plain.port if plain else -1,
        "endpoints": [e.connection_string for e in info.endpoints],
        "jmx_port": info.jmx_port,
        "timestamp": str(info.timestamp_ms),
    }
    if info.rack is not None and info.version >= 3:
        obj["rack"] = info.rack
    if info.version >= 4:
        obj["listener_security_protocol_map"] = {e.listener_name: e.security_protocol for e in info.endpoints}
    if info.version >= 5:
        obj["features"] = info.features
    return dumps(obj)


def decode_broker(broker_id: int, data: bytes | None) -> BrokerInfo:
    what = broker_path(broker_id)
    obj = loads_object(data, what)
    version = as_int(required(obj, "version", what), what)
    if version < 1:
        raise ZnodeFormatError(f"{what}: unsupported registration version {version}")
    if version == 1:
        host = required(obj, "host", what) or ""
        endpoints: tuple[EndPoint, ...] = (
            EndPoint(PLAINTEXT, host, as_int(required(obj, "port", what), what)),
        )
    else:
        protocol_map = obj.get("listener_security_protocol_map")
        texts = required(obj, "endpoints", what)
        if not isinstance(texts, list):
            raise ZnodeFormatError(f"{what}: endpoints must be a list, got {texts!r}")
        endpoints = tuple(EndPoint.parse(str(t), protocol_map) for t in texts)
    timestamp = obj.get("timestamp")
    return BrokerInfo(
        broker_id=broker_id,
        endpoints=endpoints,
        rack=obj.get("rack"),
        jmx_port=as_int(obj.get("jmx_port", -1), what),
        timestamp_ms=as_int(timestamp, what) if timestamp is not None else 0,
        features=dict(obj.get("features") or {}),
        version=version,
    )
