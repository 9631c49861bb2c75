"""`odradek-service`: the container entrypoint (the image's ENTRYPOINT).

    odradek-service <controller|broker|coordinator|gateway> [--config FILE] [--override k=v ...]
    odradek-service health [--grpc HOST:PORT | --http URL]

Running a service. The configuration comes from the environment (`ODRADEK_<KEY>`, the rule of
`services.common.config.env_var_name`), so no file is needed; `--config` and `--override` still
work and pass through to `python -m services.<kind>`. Before the service starts:

- Every `ODRADEK_*` variable must name a key of that service's config, or be one of
  `ENTRYPOINT_VARIABLES`; otherwise the entrypoint exits 2 naming it, with the closest valid
  name, so a misspelt variable fails loudly instead of being ignored. An unknown service name
  exits 2 the same way.
- Defaults a container cannot write down in advance, used only when neither the environment
  nor an `--override` sets the key. The host name is `POD_NAME`, else `HOSTNAME`, else the
  system's:
  * `broker.id` is the ordinal `n` of a host name ending in `-<n>` (StatefulSet pod
    `odradek-broker-2` is broker 2), so a broker keeps its id, and its log dirs, across restarts;
  * `controller.id` / `coordinator.id` are the CRC-32 of the host name masked to 31 bits: pods
    of a Deployment have unique names but no ordinal;
  * `advertised.listeners` is `<protocol>://<host name>.<ODRADEK_ADVERTISED_DOMAIN>:<port of
    listeners>` when `ODRADEK_ADVERTISED_DOMAIN` is set (a headless Service's domain).
- The probe target (gRPC address or HTTP /health URL) is written to `PROBE_FILE` as JSON
  `{"kind": ..., "grpc": "host:port"}` or `{"kind": ..., "http": "http://host:port/health"}`; for
  an SSL or SASL_SSL gRPC listener with `"keystore"` and `"truststore"` (the probe connects with
  the service's own certificate), for an HTTPS gateway with `"cafile"`.

Probing. `odradek-service health` checks the target in `PROBE_FILE` (the container HEALTHCHECK),
or the one given: exit 0 when a gRPC health check answers SERVING or GET /health answers 200,
1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import re
import socket
import sys
import tempfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from services.common.config import ENV_PREFIX, ConfigError, env_var_name, load_properties
from services.common.health import check_health, http_ready
from services.common.logging_setup import LOG_LEVEL_ENV
from services.common.security.tls import SSL_PROTOCOLS, TlsError, TlsSettings
from services.common.service import listener_address, service_arguments

ADVERTISED_DOMAIN_ENV = "ODRADEK_ADVERTISED_DOMAIN"
ENTRYPOINT_VARIABLES = frozenset({ADVERTISED_DOMAIN_ENV, LOG_LEVEL_ENV})
PROBE_FILE = Path(tempfile.gettempdir()) / "odradek-service.probe.json"
PROBE_TIMEOUT_MS = 3000
USAGE_EXIT = 2
_ORDINAL = re.compile(r"-(\d+)$")
_ID_MASK = 0x7FFFFFFF


@dataclass(frozen=True)
class ServiceKind:
    """One runnable service: its config class (`module:Class`), its id key, its `__main__`."""

    name: str
    config_class: str
    id_key: str

    @property
    def main_module(self) -> str:
        return f"services.{self.name}.__main__"

    def load_config_class(self):
        module, _, attribute = self.config_class.partition(":")
        return getattr(importlib.import_module(module), attribute)


SERVICES = {
    kind.name: kind
    for kind in (
        ServiceKind("controller", "services.controller.config:ControllerServiceConfig", "controller.id"),
        ServiceKind("broker", "services.broker.config:BrokerConfig", "broker.id"),
        ServiceKind("coordinator", "services.coordinator.config:CoordinatorServiceConfig", "coordinator.id"),
        ServiceKind("gateway", "services.gateway.config:GatewayConfig", "gateway.id"),
    )
}


class UsageError(Exception):
    """A bad service name or environment variable: printed, exit 2."""


def suggest(name: str, candidates: list[str] | set[str] | frozenset[str]) -> str:
    """` (did you mean X?)` for the closest candidate, or nothing."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def service_kind(name: str) -> ServiceKind:
    kind = SERVICES.get(name)
    if kind is None:
        choices = sorted(SERVICES) + ["health"]
        raise UsageError(f"unknown service {name!r}{suggest(name, choices)}; one of: {', '.join(choices)}")
    return kind


def check_environment(kind: ServiceKind, config_class, env: Mapping[str, str]) -> None:
    """Raises UsageError for the first `ODRADEK_*` variable that names no key of `config_class`."""
    known = {env_var_name(key) for key in config_class.settings()} | ENTRYPOINT_VARIABLES
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name not in known:
            raise UsageError(f"environment variable {name} names no {kind.name} configuration key"
                             f"{suggest(name, known)}")


def host_name(env: Mapping[str, str]) -> str:
    return env.get("POD_NAME") or env.get("HOSTNAME") or socket.gethostname()


def host_ordinal(host: str) -> int | None:
    """`odradek-broker-2` -> 2; None when the name does not end in `-<digits>`."""
    match = _ORDINAL.search(host)
    return int(match.group(1)) if match else None


def host_hash_id(host: str) -> int:
    """A non-negative 31-bit id from a host name (CRC-32), unique among live pods in practice."""
    return zlib.crc32(host.encode()) & _ID_MASK


def derived_settings(kind: ServiceKind, env: Mapping[str, str], supplied: Mapping[str, object]) -> dict[str, str]:
    """The container defaults (see the module doc) for keys that `env` and `supplied` leave unset."""
    def unset(key: str) -> bool:
        return env_var_name(key) not in env and key not in supplied

    host = host_name(env)
    derived: dict[str, str] = {}
    if unset(kind.id_key):
        if kind.name == "broker":
            ordinal = host_ordinal(host)
            if ordinal is not None:
                derived[kind.id_key] = str(ordinal)
        elif kind.name in ("controller", "coordinator"):
            derived[kind.id_key] = str(host_hash_id(host))
    domain = env.get(ADVERTISED_DOMAIN_ENV, "").strip(".")
    if domain and unset("advertised.listeners"):
        listeners = str(supplied.get("listeners") or env.get(env_var_name("listeners")) or "")
        derived["advertised.listeners"] = advertised_listener(listeners, f"{host}.{domain}")
    return derived


def advertised_listener(listeners: str, host: str) -> str:
    """The first of `listeners` (`PLAINTEXT://:9092`, `http://0.0.0.0:8080`) with `host` in it."""
    first = listeners.split(",")[0].strip()
    protocol, sep, address = first.rpartition("://")
    port = address.rpartition(":")[2]
    if not port.isdigit():
        raise UsageError(f"cannot advertise {host}: listeners {listeners!r} names no port")
    return f"{protocol if sep else 'PLAINTEXT'}://{host}:{port}"


def probe_target(kind: ServiceKind, config) -> dict[str, str]:
    """Where this container's service answers its health check, from its loaded config; for a TLS
    listener also the files the probe trusts (and, for gRPC's mutual TLS, presents)."""
    if kind.name == "gateway":
        host, port = listener_address(config.listeners)
        scheme = "https" if config.listeners.strip().lower().startswith("https://") else "http"
        target = {"kind": kind.name, "http": f"{scheme}://{local_host(host)}:{port}/health"}
        cafile = config.ssl_truststore_location or config.client_ssl_truststore_location
        return {**target, "cafile": cafile} if scheme == "https" and cafile else target
    listener = config.listener
    target = {"kind": kind.name, "grpc": f"{local_host(listener.host)}:{listener.port}"}
    if listener.protocol in SSL_PROTOCOLS and config.ssl_keystore_location:
        target.update(keystore=config.ssl_keystore_location, truststore=config.ssl_truststore_location or "")
    return target


def local_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def run_service(name: str, argv: list[str], env: Mapping[str, str]) -> int:
    kind = service_kind(name)
    config_class = kind.load_config_class()
    check_environment(kind, config_class, env)
    args = service_arguments(f"Odradek {kind.name}", argv)
    file_settings = {}
    if args.config:
        try:
            file_settings = load_properties(args.config)
        except (OSError, ConfigError):
            pass  # the service's own start reports it
    derived = derived_settings(kind, env, {**file_settings, **args.overrides})
    service_argv = [arg for key, value in derived.items() for arg in ("--override", f"{key}={value}")] + argv
    try:
        config = config_class.load(*([args.config] if args.config else []), {**derived, **args.overrides},
                                   env=env)
        write_probe_file(probe_target(kind, config))
    except (ConfigError, ValueError, OSError):
        pass  # the service's own start reports a bad config (exit 2)
    main = importlib.import_module(kind.main_module).main
    return main(service_argv)


def write_probe_file(target: dict[str, str], path: Path = PROBE_FILE) -> None:
    try:
        path.write_text(json.dumps(target))
    except OSError:
        pass  # a read-only /tmp: orchestrators probe the ports themselves


def probe(grpc_target: str | None, http_url: str | None, path: Path = PROBE_FILE) -> bool:
    """Whether the target given, or the one in the probe file, answers healthy."""
    target: dict[str, str] = {}
    if grpc_target is None and http_url is None:
        try:
            target = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        grpc_target, http_url = target.get("grpc"), target.get("http")
    if grpc_target:
        tls = None
        if target.get("keystore"):
            try:
                tls = TlsSettings.load(target["keystore"], target.get("truststore") or None)
            except (TlsError, OSError):
                return False
        return check_health(grpc_target, timeout_ms=PROBE_TIMEOUT_MS, tls=tls)
    return bool(http_url) and http_ready(http_url, timeout_s=PROBE_TIMEOUT_MS / 1000, cafile=target.get("cafile"))


def health(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="odradek-service health",
                                     description="Exit 0 when this container's service is healthy.")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--grpc", metavar="HOST:PORT", help="check the gRPC health service there")
    target.add_argument("--http", metavar="URL", help="GET this URL (a gateway's /health)")
    args = parser.parse_args(argv)
    return 0 if probe(args.grpc, args.http) else 1


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    env = os.environ if env is None else env
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1], file=sys.stderr if not argv else sys.stdout)
        return USAGE_EXIT if not argv else 0
    try:
        if argv[0] == "health":
            return health(argv[1:])
        return run_service(argv[0], argv[1:], env)
    except UsageError as exc:
        print(f"odradek-service: {exc}", file=sys.stderr)
        return USAGE_EXIT


if __name__ == "__main__":
    sys.exit(main())
