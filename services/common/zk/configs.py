"""Dynamic topic configs: `/config/topics/<topic>` and `/config/changes/config_change_<seq>`.

`/config/topics/<topic>` (persistent) holds the topic's overrides of broker defaults, every value a
string, with Kafka's key names:

    {"version":1,"config":{"cleanup.policy":"compact","retention.ms":"86400000"}}

A change to an existing topic's config is announced by a persistent sequential notification that
names the changed entity; brokers watch `/config/changes` and reread that entity:

    {"version":2,"entity_path":"topics/<topic>"}

A user's configs (SCRAM credentials, as Kafka keeps them) sit in `/config/users/<user>`,
announced as `users/<user>`. Dynamic broker configs sit in `/config/brokers/<id>` (one broker's)
and `/config/brokers/<default>` (cluster-wide defaults), in the same format, announced as
`brokers/<id>` or `brokers/<default>`.
`/config/<type>` exists for Kafka's other entity types (clients, users, ips) too.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.common.zk.codec import as_int, dumps, loads_object, segment
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError

CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
TOPIC_ENTITY_TYPE = "topics"
BROKER_ENTITY_TYPE = "brokers"
USER_ENTITY_TYPE = "users"
ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")


def entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{segment(entity_type, 'config entity type')}"


def topic_config_path(topic: str) -> str:
    return f"{entity_type_path(TOPIC_ENTITY_TYPE)}/{segment(topic, 'topic name')}"


def topic_entity_path(topic: str) -> str:
    """The `entity_path` of a topic in a change notification: `topics/<topic>`."""
    return f"{TOPIC_ENTITY_TYPE}/{segment(topic, 'topic name')}"


def broker_config_path(entity: str) -> str:
    """`entity` is a broker id or `<default>`."""
    return f"{entity_type_path(BROKER_ENTITY_TYPE)}/{segment(entity, 'broker config entity')}"


def broker_entity_path(entity: str) -> str:
    """The `entity_path` of a broker config change: `brokers/<id>` or `brokers/<default>`."""
    return f"{BROKER_ENTITY_TYPE}/{segment(entity, 'broker config entity')}"


def user_config_path(user: str) -> str:
    """A user's configs: Kafka keeps SCRAM credentials here (`SCRAM-SHA-512` => `salt=...,...`)."""
    return f"{entity_type_path(USER_ENTITY_TYPE)}/{segment(user, 'user name')}"


def user_entity_path(user: str) -> str:
    return f"{USER_ENTITY_TYPE}/{segment(user, 'user name')}"


def config_change_path(sequence_number: str = "") -> str:
    return f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}{sequence_number}"


def encode_config(config: Mapping[str, object]) -> bytes:
    return dumps({"version": 1, "config": {str(k): str(v) for k, v in sorted(config.items())}})


def decode_config(data: bytes | None, what: str = CONFIG_PATH) -> dict[str, str]:
    """The config map; empty for a znode without data, as Kafka reads it."""
    if not data:
        return {}
    config = loads_object(data, what).get("config") or {}
    if not isinstance(config, dict):
        raise ZnodeFormatError(f"{what}: config must be an object, got {config!r}")
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    return dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None) -> str:
    """The changed entity's path, `<type>/<name>`; version 1 notifications
    (`{"version":1,"entity_type":"topics","entity_name":"t"}`) read the same way."""
    what = CONFIG_CHANGES_PATH
    obj = loads_object(data, what)
    version = as_int(required(obj, "version", what), what)
    if version == 1:
        return f"{required(obj, 'entity_type', what)}/{required(obj, 'entity_name', what)}"
    return str(required(obj, "entity_path", what))
