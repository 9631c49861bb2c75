"""Reading the deployment files as a container runtime would, for the deploy tests.

- `dockerfile_stages`: the Dockerfile's stages, instruction by instruction; `exec_form` decodes a
  JSON-array ENTRYPOINT / CMD / HEALTHCHECK.
- `render_kustomize`: `kubectl kustomize DIR` as a list of documents (fails, never skips, without
  kubectl).
- `compose_pods` / `k8s_pods`: each Odradek container the compose file or the rendered manifests
  would run, as a `Pod` (argv, environment, names it is reached by, volume mount paths), with the
  environment a runtime gives it: compose's `environment`; Kubernetes' `envFrom` ConfigMaps, `env`
  with `fieldRef` values and `$(VAR)` expansion, HOSTNAME, and the service-link variables a pod
  gets unless `enableServiceLinks: false`.
- `secure_overlay`: a copy of deploy/k8s with the secure overlay's CA made as its kustomization says
  (`odradek dev certs --out ca --identity admin`), so it renders.
- `Localizer`: the only changes made before such a pod runs on loopback: host names become
  127.0.0.1, ports become free ports (one per pod and port), ZooKeeper's connect string becomes
  the test's, paths under a volume mount move to a temporary directory. A host name that names no
  pod is an error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from services.devcluster.proc import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO_ROOT / "Dockerfile"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
SECURE_COMPOSE_FILE = REPO_ROOT / "docker-compose.secure.yml"
K8S_BASE = REPO_ROOT / "deploy" / "k8s"
K8S_DEV = K8S_BASE / "overlays" / "dev"
K8S_SECURE = K8S_BASE / "overlays" / "secure"
IMAGE_NAME = "odradek"
NAMESPACE = "odradek"
KIND_ORDER = ("controller", "broker", "coordinator", "gateway")


# ------------------------------------------------------------------------------------------- Dockerfile


def dockerfile_stages(path: Path = DOCKERFILE) -> dict[str, list[tuple[str, str]]]:
    """Stage name -> [(INSTRUCTION, arguments)], continuation lines joined, comments dropped; the
    build arguments declared before the first FROM at their defaults in FROM lines."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    global_args: dict[str, str] = {}
    logical = re.sub(r"\\\n", " ", "\n".join(line for line in path.read_text().splitlines()
                                             if not line.lstrip().startswith("#")))
    for line in logical.splitlines():
        if not line.strip():
            continue
        instruction, _, arguments = line.strip().partition(" ")
        instruction = instruction.upper()
        if instruction == "ARG" and current is None:
            name, _, default = arguments.strip().partition("=")
            global_args[name] = default
            continue
        if instruction == "FROM":
            arguments = re.sub(r"\$\{(\w+)\}", lambda match: global_args[match.group(1)], arguments)
            match = re.search(r"\bAS\s+(\S+)", arguments, re.IGNORECASE)
            current = stages.setdefault(match.group(1) if match else f"stage{len(stages)}", [])
        assert current is not None, f"{instruction} before FROM"
        current.append((instruction, arguments.strip()))
    return stages


def exec_form(arguments: str) -> list[str]:
    """`["odradek-service", "health"]` -> the list; a shell-form instruction fails the test."""
    try:
        value = json.loads(arguments)
    except ValueError:
        pytest.fail(f"not in exec (JSON array) form: {arguments}")
    assert isinstance(value, list) and all(isinstance(item, str) for item in value), arguments
    return value


def last(stage: list[tuple[str, str]], instruction: str) -> str | None:
    values = [arguments for name, arguments in stage if name == instruction]
    return values[-1] if values else None


def image_command(stage: str = "runtime") -> tuple[list[str], list[str]]:
    """The runtime stage's ENTRYPOINT and CMD."""
    stages = dockerfile_stages()
    entrypoint, cmd = last(stages[stage], "ENTRYPOINT"), last(stages[stage], "CMD")
    assert entrypoint and cmd, f"stage {stage} has no ENTRYPOINT or CMD"
    return exec_form(entrypoint), exec_form(cmd)


def console_scripts() -> dict[str, str]:
    """pyproject's [project.scripts]: name -> `module:function`."""
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]


# ------------------------------------------------------------------------------------------- manifests


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl is not installed: the Kubernetes manifests are rendered with `kubectl kustomize`",
                    pytrace=False)
    return path


def render_kustomize(directory: Path) -> list[dict]:
    result = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def secure_overlay(directory: Path) -> Path:
    """deploy/k8s copied to `directory` (without any CA of the checkout) with a new CA in the secure
    overlay's ca/, made by `odradek dev certs` as the overlay's kustomization says; its overlay dir."""
    shutil.copytree(K8S_BASE, directory, ignore=shutil.ignore_patterns("ca"))
    overlay = directory / K8S_SECURE.relative_to(K8S_BASE)
    result = subprocess.run([*console_script_argv(["odradek"]), "dev", "certs", "--out", str(overlay / "ca"),
                             "--identity", "admin"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return overlay


def console_script_argv(argv: list[str]) -> list[str]:
    """`odradek-service broker` as pip's console-script wrapper runs it, with this interpreter."""
    target = console_scripts().get(argv[0])
    assert target, f"{argv[0]} is no console script of pyproject.toml"
    module, _, function = target.partition(":")
    wrapper = f"import sys; sys.argv[0] = {argv[0]!r}; from {module} import {function}; sys.exit({function}())"
    return [sys.executable, "-c", wrapper, *argv[1:]]


def secure_compose_config(tls_dir: Path) -> dict:
    """docker-compose.yml with docker-compose.secure.yml over it, as `docker-compose config` merges
    them, the certificates' directory at `tls_dir`."""
    result = subprocess.run([docker_compose(), "-f", str(COMPOSE_FILE), "-f", str(SECURE_COMPOSE_FILE), "config"],
                            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
                            env={"PATH": os.environ["PATH"], "ODRADEK_TLS_DIR": str(tls_dir)})
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def docker_compose() -> str:
    path = shutil.which("docker-compose")
    if path is None:
        pytest.fail("docker-compose is not installed: `make system-deps` installs Debian's docker-compose",
                    pytrace=False)
    return path


COMPOSE_DEFAULT = re.compile(r"\$\{\w+:-([^}]*)\}")


def compose_config(path: Path = COMPOSE_FILE) -> dict:
    """The compose file with every `${NAME:-default}` at its default, as compose reads it with the
    variables unset."""
    return yaml.safe_load(COMPOSE_DEFAULT.sub(lambda match: match.group(1), path.read_text()))


@dataclass
class Pod:
    """One Odradek container as its runtime would start it."""

    name: str
    kind: str  # the service argument: controller, broker, coordinator or gateway
    argv: list[str]
    env: dict[str, str]
    names: set[str] = field(default_factory=set)  # host names and addresses that reach it
    mounts: list[str] = field(default_factory=list)
    # run to completion before it, in order: (argv, environment) of each Kubernetes init container
    init: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)  # mount path -> the Secret mounted there


def compose_pods(compose: dict, entrypoint: list[str], cmd: list[str]) -> tuple[list[Pod], set[str]]:
    """The Odradek containers `docker compose up` starts, and the host names of ZooKeeper."""
    pods, zookeeper = [], set()
    for name, service in compose["services"].items():
        if service.get("profiles"):
            continue
        image = str(service.get("image", ""))
        if image.startswith("zookeeper"):
            zookeeper |= {name, service.get("hostname", name)}
            continue
        assert image.startswith(IMAGE_NAME + ":"), f"{name}: unexpected image {image}"
        argv = entrypoint + list(service.get("command") or cmd)
        env = {"HOSTNAME": service.get("hostname", name), **{k: str(v) for k, v in service["environment"].items()}}
        mounts = [str(volume).split(":")[1] for volume in service.get("volumes", [])]
        pods.append(Pod(name, argv[len(entrypoint)], argv, env, {name, env["HOSTNAME"]}, mounts))
    return pods, zookeeper


def k8s_pods(docs: list[dict], entrypoint: list[str]) -> tuple[list[Pod], set[str]]:
    """The Odradek pods the rendered manifests create, and the host names of ZooKeeper."""
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    services = [d for d in docs if d["kind"] == "Service"]
    pods, zookeeper = [], set()
    for workload in (d for d in docs if d["kind"] in ("StatefulSet", "Deployment")):
        template = workload["spec"]["template"]
        labels = template["metadata"]["labels"]
        selecting = {s["metadata"]["name"] for s in services
                     if s["spec"].get("selector") and s["spec"]["selector"].items() <= labels.items()}
        container = template["spec"]["containers"][0]
        name = workload["metadata"]["name"]
        if not container["image"].startswith(IMAGE_NAME + ":"):
            zookeeper |= selecting | {name}
            continue
        for index in range(workload["spec"].get("replicas", 1)):
            pod_name = f"{name}-{index}" if workload["kind"] == "StatefulSet" else f"{name}-5d8c7b9f6-x{index}"
            pod_ip = f"10.244.{len(pods) + 1}.{index + 10}"
            env = pod_environment(template["spec"], container, config_maps, services, pod_name, pod_ip)
            argv = list(container.get("command") or entrypoint) + list(container.get("args") or [])
            init = [(list(c.get("command") or entrypoint) + list(c.get("args") or []),
                     pod_environment(template["spec"], c, config_maps, services, pod_name, pod_ip))
                    for c in template["spec"].get("initContainers", [])]
            mounts = [m["mountPath"] for c in [container, *template["spec"].get("initContainers", [])]
                      for m in c.get("volumeMounts", [])]
            secret_volumes = {v["name"]: v["secret"]["secretName"] for v in template["spec"].get("volumes", [])
                              if "secret" in v}
            secrets = {m["mountPath"]: secret_volumes[m["name"]]
                       for c in [container, *template["spec"].get("initContainers", [])]
                       for m in c.get("volumeMounts", []) if m["name"] in secret_volumes}
            pods.append(Pod(pod_name, argv[len(entrypoint)], argv, env, {pod_name, pod_ip} | selecting,
                            list(dict.fromkeys(mounts)), init, secrets))
    return pods, zookeeper


def expand_variables(argv: list[str], env: dict[str, str]) -> list[str]:
    """`$(VAR)` in a container's command and args, as Kubernetes expands them from its environment."""
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), arg)
            for arg in argv]


def pod_environment(spec: dict, container: dict, config_maps: dict, services: list[dict],
                    pod_name: str, pod_ip: str) -> dict[str, str]:
    """What a container's process sees: service links (unless disabled), HOSTNAME, envFrom, env."""
    env: dict[str, str] = {}
    if spec.get("enableServiceLinks", True):
        for service in services:
            prefix = service["metadata"]["name"].upper().replace("-", "_")
            port = service["spec"]["ports"][0]["port"]
            env.update({f"{prefix}_SERVICE_HOST": "10.96.0.10", f"{prefix}_SERVICE_PORT": str(port),
                        f"{prefix}_PORT": f"tcp://10.96.0.10:{port}"})
    env["HOSTNAME"] = pod_name
    for source in container.get("envFrom", []):
        env.update({k: str(v) for k, v in config_maps[source["configMapRef"]["name"]].items()})
    fields = {"metadata.name": pod_name, "metadata.namespace": NAMESPACE, "status.podIP": pod_ip}
    for variable in container.get("env", []):
        if "valueFrom" in variable:
            env[variable["name"]] = fields[variable["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[variable["name"]] = expand_variables([str(variable["value"])], env)[0]
    return env


# ------------------------------------------------------------------------------------------- loopback

_ADDRESS = r"(?:[a-zA-Z][a-zA-Z0-9+._-]*://)?(?:[A-Za-z0-9.-]*):\d+"
_ADDRESS_LIST = re.compile(rf"{_ADDRESS}(?:,{_ADDRESS})*")
_ADDRESS_PARTS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+._-]*://)?(?P<host>[A-Za-z0-9.-]*):(?P<port>\d+)")
_SELF_HOSTS = {"", "0.0.0.0", "localhost", "127.0.0.1"}


class Localizer:
    """Rewrites pods' environments for loopback (see the module doc)."""

    def __init__(self, pods: list[Pod], zookeeper_hosts: set[str], zookeeper_connect: str, data_dir: Path):
        self.pods = pods
        self.zookeeper_hosts = zookeeper_hosts
        self.zookeeper_connect = zookeeper_connect
        self.data_dir = data_dir
        self.ports: dict[tuple[str, int], int] = {}

    def port(self, pod: Pod, port: int) -> int:
        key = (pod.name, port)
        if key not in self.ports:
            self.ports[key] = free_port()
        return self.ports[key]

    def pod_for(self, host: str, self_pod: Pod) -> Pod | None:
        """The pod `host` reaches (None for ZooKeeper); an unknown host fails the test."""
        if host in _SELF_HOSTS:
            return self_pod
        label = host.split(".")[0]
        for candidate in (host, label):
            if candidate in self.zookeeper_hosts:
                return None
            for pod in self.pods:
                if candidate in pod.names:
                    return pod
        pytest.fail(f"{self_pod.name}: host {host!r} names no service of the deployment")

    def rewrite(self, pod: Pod, key: str, value: str) -> str:
        if _ADDRESS_LIST.fullmatch(value):
            return self.rewrite_addresses(pod, value)
        if key.endswith("_PORT") and value.isdigit():
            return str(self.port(pod, int(value)))
        for mount in pod.mounts:
            if value == mount or value.startswith(mount.rstrip("/") + "/"):
                return str(self.data_dir / pod.name / value.lstrip("/"))
        return value

    def rewrite_addresses(self, pod: Pod, value: str) -> str:
        parts = [_ADDRESS_PARTS.fullmatch(item) for item in value.split(",")]
        targets = [self.pod_for(part["host"], pod) for part in parts]
        if all(target is None for target in targets):
            return self.zookeeper_connect
        assert None not in targets, f"{pod.name}: {value} mixes ZooKeeper with other services"
        return ",".join(f"{part['scheme'] or ''}127.0.0.1:{self.port(target, int(part['port']))}"
                        for part, target in zip(parts, targets, strict=True))

    def environment(self, pod: Pod, env: dict[str, str] | None = None) -> dict[str, str]:
        """The pod's environment (or an init container's, `env`) rewritten for loopback."""
        return {key: self.rewrite(pod, key, value) for key, value in (pod.env if env is None else env).items()}

    def path(self, pod: Pod, mount_path: str) -> Path:
        """Where a volume mounted at `mount_path` is for the pod on loopback."""
        return Path(self.rewrite(pod, "", mount_path))

    def listen_port(self, pod: Pod) -> int:
        """The loopback port of the pod's first listener."""
        match = _ADDRESS_PARTS.search(pod.env["ODRADEK_LISTENERS"])
        return self.port(pod, int(match["port"]))
