"""Broker registrations: `/brokers/ids/<id>` (ephemeral) and `/brokers/seqid`.

`/brokers/ids/<id>` is written by the broker itself when its ZooKeeper session starts and vanishes
with the session. The broker epoch is the znode's creation zxid (`stat.czxid`), so it grows with
every registration. Kafka 2.8 writes version 5:

    {"version":5,"host":"h1","port":9092,"endpoints":["PLAINTEXT://h1:9092"],
     "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"rack":"r1","jmx_port":-1,
     "timestamp":"1620000000000","features":{}}

`host`/`port` repeat the first PLAINTEXT endpoint for old clients (null and -1 if there is none);
`rack` is omitted when the broker has none; `timestamp` is milliseconds as a string; `features`
maps a feature name to {"min_version": n, "max_version": m}. Decoded, a registration is a
`services.common.shared_types.BrokerInfo` whose broker epoch is the znode's czxid. Versions 1 to 4 are read too (version
1 has only host and port; versions 2 and 3 have no protocol map, so listener names are protocols).

`/brokers/seqid` holds no data; its data version is the last generated broker sequence id.
"""

from __future__ import annotations

import re

from services.common.shared_types import PLAINTEXT, UNKNOWN_BROKER_EPOCH, BrokerInfo, EndPoint
from services.common.zk.codec import as_int, dumps, loads_object
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQID_PATH = "/brokers/seqid"

_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def parse_endpoint(text: str, protocol_map: dict[str, str] | None = None) -> EndPoint:
    """`LISTENER://host:port` as an EndPoint; the listener's protocol comes from the map (or is the
    listener's name when there is no map, as in versions 2 and 3)."""
    match = _ENDPOINT.match(text)
    if match is None:
        raise ZnodeFormatError(f"unable to parse {text!r} as a broker endpoint")
    listener = match.group(1).upper()
    protocol = (protocol_map or {}).get(listener, listener if protocol_map is None else None)
    if protocol is None:
        raise ZnodeFormatError(f"no security protocol defined for listener {listener}")
    return EndPoint(match.group(2), int(match.group(3)), listener, protocol)


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
        obj["features"] = {name: {"min_version": low, "max_version": high} for name, low, high in info.features}
    return dumps(obj)


def decode_broker(broker_id: int, data: bytes | None, broker_epoch: int = UNKNOWN_BROKER_EPOCH) -> BrokerInfo:
    """A registration; `broker_epoch` is its znode's czxid."""
    what = broker_path(broker_id)
    obj = loads_object(data, what)
    version = as_int(required(obj, "version", what), what)
    if version < 1:
        raise ZnodeFormatError(f"{what}: unsupported registration version {version}")
    if version == 1:
        host = required(obj, "host", what) or ""
        endpoints: tuple[EndPoint, ...] = (
            EndPoint(host, as_int(required(obj, "port", what), what)),
        )
    else:
        protocol_map = obj.get("listener_security_protocol_map")
        texts = required(obj, "endpoints", what)
        if not isinstance(texts, list):
            raise ZnodeFormatError(f"{what}: endpoints must be a list, got {texts!r}")
        endpoints = tuple(parse_endpoint(str(t), protocol_map) for t in texts)
    timestamp = obj.get("timestamp")
    return BrokerInfo(
        broker_id=broker_id,
        endpoints=endpoints,
        rack=obj.get("rack"),
        broker_epoch=broker_epoch,
        jmx_port=as_int(obj.get("jmx_port", -1), what),
        timestamp_ms=as_int(timestamp, what) if timestamp is not None else 0,
        features=_decode_features(obj.get("features") or {}, what),
        version=version,
    )


def _decode_features(features: object, what: str) -> tuple[tuple[str, int, int], ...]:
    if not isinstance(features, dict) or not all(isinstance(v, dict) for v in features.values()):
        raise ZnodeFormatError(f"{what}: features must map names to version ranges, got {features!r}")
    return tuple(
        (str(name), as_int(required(v, "min_version", what), what), as_int(required(v, "max_version", what), what))
        for name, v in sorted(features.items())
    )
