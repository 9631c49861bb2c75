"""`DynamicBrokerConfig`: this broker's effective config — dynamic per-broker configs over the
cluster-wide dynamic defaults over the static properties over Kafka's defaults — its live application
to the log manager's default log config and to whatever else follows it (`on_config`: the replica
fetchers), and its description with sources and synonyms.
`ConfigChangeListener`: follows `/config/changes` and rereads the changed entity: this broker's or
the default broker configs, or a hosted topic's overrides.

Only the keys of `common.dynamic_broker_configs` are taken from ZooKeeper; others found there are
logged and ignored. A dynamic set the broker's config refuses (a value out of range) is logged and
the previous effective config stays.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.watchers import ChildrenWatch

from services.broker.config import BrokerConfig
from services.broker.log.config import LogConfig
from services.clients.admin_types import ConfigEntry, ConfigSynonym
from services.common.config import CONFIG_TYPE_CODES, ConfigType
from services.common.dynamic_broker_configs import (
    DEFAULT_BROKER_ENTITY,
    DEFAULT_CONFIG_SOURCE,
    DYNAMIC_BROKER_CONFIG_SOURCE,
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE,
    STATIC_BROKER_CONFIG_SOURCE,
)
from services.common.errors import Errors, KafkaError
from services.common.zk import OdradekZkClient
from services.common.zk.configs import BROKER_ENTITY_TYPE, CONFIG_CHANGES_PATH, TOPIC_ENTITY_TYPE

logger = logging.getLogger(__name__)


def config_text(value: Any) -> str | None:
    """A config value as Kafka writes it: booleans in lower case, lists comma-separated."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


class DynamicBrokerConfig:
    def __init__(self, broker_id: int, static: BrokerConfig,
                 on_log_defaults: Callable[[LogConfig], None] = lambda _config: None,
                 on_config: Callable[[BrokerConfig], None] = lambda _config: None) -> None:
        self.broker_id = broker_id
        self.static = static
        self.current = static
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self._on_log_defaults = on_log_defaults
        self._on_config = on_config
        self._lock = threading.Lock()

    def update(self, dynamic_default: Mapping[str, str], dynamic_broker: Mapping[str, str]) -> bool:
        """Applies new dynamic layers; False (and nothing changed) when the result is refused."""
        default, own = _dynamic_only(dynamic_default, "<default>"), _dynamic_only(dynamic_broker, self.broker_id)
        with self._lock:
            try:
                config = BrokerConfig.load(self.static.originals(), default, own, env={})
                log_defaults = LogConfig.from_props(config.log_defaults())
            except Exception as exc:
                logger.error("dynamic broker configs %s / %s not applied: %s", default, own, exc)
                return False
            changed = config.as_dict() != self.current.as_dict()
            log_defaults_changed = log_defaults != LogConfig.from_props(self.current.log_defaults())
            self.current, self.dynamic_default, self.dynamic_broker = config, default, own
        if changed:
            logger.info("dynamic broker configs applied: defaults %s, broker %d %s", default, self.broker_id, own)
            self._on_config(config)
        if log_defaults_changed:
            self._on_log_defaults(log_defaults)
        return True

    def reload(self, zk: OdradekZkClient) -> bool:
        return self.update(zk.get_broker_config(DEFAULT_BROKER_ENTITY), zk.get_broker_config(str(self.broker_id)))

    def describe(self, name: str, keys: tuple[str, ...] = (), include_synonyms: bool = False,
                 include_documentation: bool = False) -> dict[str, ConfigEntry]:
        """The configs of broker resource `name`: this broker's id describes every key with its
        effective value; "" describes the cluster-wide dynamic defaults only."""
        if name == "":
            return {key: ConfigEntry(key, value, DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE, False, False,
                                     CONFIG_TYPE_CODES.get(DYNAMIC_BROKER_CONFIGS[key], 0), None,
                                     (ConfigSynonym(key, value, DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE),)
                                     if include_synonyms else ())
                    for key, value in sorted(self.dynamic_default.items()) if not keys or key in keys}
        if name != str(self.broker_id):
            raise KafkaError(f"broker {self.broker_id} describes its own configs (resource name {self.broker_id}) "
                             f"or the cluster defaults (\"\"), not {name!r}", error=Errors.INVALID_REQUEST)
        supplied = self.static.originals()
        entries = {}
        for key, spec in BrokerConfig.settings().items():
            if keys and key not in keys:
                continue
            sensitive = spec.kind is ConfigType.PASSWORD
            layers = []
            if key in self.dynamic_broker:
                layers.append((self.dynamic_broker[key], DYNAMIC_BROKER_CONFIG_SOURCE))
            if key in self.dynamic_default:
                layers.append((self.dynamic_default[key], DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE))
            if key in supplied:
                layers.append((config_text(getattr(self.static, spec.attribute)), STATIC_BROKER_CONFIG_SOURCE))
            if not spec.required:
                layers.append((config_text(spec.convert(spec.default)), DEFAULT_CONFIG_SOURCE))
            if not layers:
                layers.append((config_text(getattr(self.current, spec.attribute)), STATIC_BROKER_CONFIG_SOURCE))
            value = None if sensitive else config_text(getattr(self.current, spec.attribute))
            synonyms = tuple(ConfigSynonym(key, None if sensitive else v, s) for v, s in layers
                             if v is not None or s != DEFAULT_CONFIG_SOURCE)
            entries[key] = ConfigEntry(key, value, layers[0][1], key not in DYNAMIC_BROKER_CONFIGS, sensitive,
                                       CONFIG_TYPE_CODES.get(spec.kind, 0),
                                       (spec.doc or None) if include_documentation else None,
                                       synonyms if include_synonyms else ())
        return entries


def _dynamic_only(configs: Mapping[str, str], entity: object) -> dict[str, str]:
    ignored = sorted(k for k in configs if k not in DYNAMIC_BROKER_CONFIGS)
    if ignored:
        logger.warning("broker configs of %s in ZooKeeper that cannot change dynamically are ignored: %s",
                       entity, ", ".join(ignored))
    return {k: v for k, v in configs.items() if k in DYNAMIC_BROKER_CONFIGS}


NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000  # as Kafka's ZkNodeChangeNotificationListener


class ConfigChangeListener:
    """Watches `/config/changes` and, on its own thread, rereads each entity announced after the
    last one seen: `brokers/<default>` and `brokers/<this id>` reload the dynamic broker configs,
    `topics/<t>` calls `on_topic_change(t)`. Notifications already present at start are taken as
    seen: `start` is called after the current state was read. Seen notifications older than 15
    minutes are deleted, as Kafka's brokers purge them."""

    def __init__(self, zk_raw: KazooClient, zk: OdradekZkClient, dynamic: DynamicBrokerConfig,
                 on_topic_change: Callable[[str], None]) -> None:
        self._zk_raw, self._zk, self._dynamic = zk_raw, zk, dynamic
        self._on_topic_change = on_topic_change
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._last_seen = ""
        self._thread = threading.Thread(target=self._run, name="config-changes", daemon=True)

    def start(self) -> None:
        self._zk.until_connected(self._zk_raw.ensure_path, CONFIG_CHANGES_PATH)
        self._last_seen = (self._zk.until_connected(self._zk.get_config_change_notifications) or [""])[-1]
        ChildrenWatch(self._zk_raw, CONFIG_CHANGES_PATH, self._on_children)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._changed.set()

    def _on_children(self, _children: list[str]) -> bool:
        self._changed.set()
        return not self._stopping.is_set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._changed.wait()
            self._changed.clear()
            if self._stopping.is_set():
                return
            try:
                self.process_changes()
            except Exception:
                logger.exception("processing config change notifications failed; retrying")
                self._stopping.wait(1.0)
                self._changed.set()

    def process_changes(self) -> None:
        own = {f"{BROKER_ENTITY_TYPE}/{DEFAULT_BROKER_ENTITY}", f"{BROKER_ENTITY_TYPE}/{self._dynamic.broker_id}"}
        reload_brokers = False
        for name in self._zk.get_config_change_notifications():
            if name <= self._last_seen:
                continue
            entity = self._zk.get_config_change(name)
            if entity in own:
                reload_brokers = True
            elif entity is not None and entity.startswith(f"{TOPIC_ENTITY_TYPE}/"):
                self._on_topic_change(entity[len(TOPIC_ENTITY_TYPE) + 1:])
            self._last_seen = name
        if reload_brokers:
            self._dynamic.reload(self._zk)
        self._purge_expired()

    def _purge_expired(self) -> None:
        expired = []
        now_ms = int(time.time() * 1000)
        for name in self._zk.get_config_change_notifications():
            if name > self._last_seen:
                break
            stat = self._zk_raw.exists(f"{CONFIG_CHANGES_PATH}/{name}")
            if stat is not None and now_ms - stat.ctime > NOTIFICATION_EXPIRY_MS:
                expired.append(name)
        self._zk.delete_config_change_notifications(expired)
