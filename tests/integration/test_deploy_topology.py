"""The deployment files start a working cluster: every Odradek container of docker-compose.yml and
of the Kubernetes overlays runs on loopback as its runtime would start it -- the image's
ENTRYPOINT (the `odradek-service` console script) with the file's command and environment taken
verbatim, changing only host names, ports and data paths (see tests/deploy_support.py) -- against
the tests' ZooKeeper; then all brokers are registered, a topic is created, records are produced
through the gateway's HTTP API and consumed back through a consumer group. A misspelt variable or
service name in the files fails here, as it would fail the container."""

from __future__ import annotations

import base64
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.common.health import check_health, http_ready
from services.common.security.tls import TlsSettings
from services.devcluster.proc import log_tail, start_process, stop_process, wait_until
from tests.deploy_support import (
    K8S_BASE,
    K8S_DEV,
    KIND_ORDER,
    Localizer,
    Pod,
    compose_config,
    compose_pods,
    console_script_argv,
    expand_variables,
    image_command,
    k8s_pods,
    render_kustomize,
    secure_compose_config,
    secure_overlay,
)

V2 = "application/vnd.kafka.v2+json"
JSON_EMBEDDED = "application/vnd.kafka.json.v2+json"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 4
RECORDS = 20


class Deployment:
    """The pods of one deployment file, started on loopback; every process stopped by its pid."""

    def __init__(self, pods: list[Pod], localizer: Localizer, log_dir: Path,
                 secrets: dict[str, dict[str, bytes]] | None = None):
        # in the launcher's order; a misspelt service name last, where its exit 2 fails the test
        self.pods = sorted(pods, key=lambda pod: (KIND_ORDER + (pod.kind,)).index(pod.kind))
        self.localizer = localizer
        self.log_dir = log_dir
        self.secrets = secrets or {}  # Secret name -> file name -> content
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self) -> None:
        base_env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        for pod in self.pods:
            self.run_init_containers(pod, base_env)
            env = {**base_env, **self.localizer.environment(pod)}
            self.processes[pod.name] = start_process(console_script_argv(pod.argv), self.log(pod), env=env)
        for pod in self.pods:
            wait_until(lambda pod=pod: self.serving(pod), START_TIMEOUT_S, 0.2,
                       message=lambda pod=pod: f"{pod.name} to serve:\n{log_tail(self.log(pod), 40)}")

    def run_init_containers(self, pod: Pod, base_env: dict[str, str]) -> None:
        """The pod's Secrets written where they are mounted, then its init containers, each to exit 0."""
        for mount_path, secret in pod.secrets.items():
            directory = self.localizer.path(pod, mount_path)
            directory.mkdir(parents=True, exist_ok=True)
            for name, content in self.secrets[secret].items():
                (directory / name).write_bytes(content)
        for argv, init_env in pod.init:
            env = self.localizer.environment(pod, init_env)
            result = subprocess.run(console_script_argv(expand_variables(argv, env)), env={**base_env, **env},
                                    capture_output=True, text=True, timeout=START_TIMEOUT_S)
            assert result.returncode == 0, f"{pod.name}: init container {argv} failed:\n{result.stdout}{result.stderr}"

    def tls(self, pod: Pod) -> TlsSettings | None:
        """The pod's own TLS identity when its gRPC listener is SSL (what its probe presents)."""
        env = self.localizer.environment(pod)
        if not env.get("ODRADEK_LISTENERS", "").upper().startswith("SSL://"):
            return None
        return TlsSettings.load(env["ODRADEK_SSL_KEYSTORE_LOCATION"], env["ODRADEK_SSL_TRUSTSTORE_LOCATION"])

    def gateway_cafile(self, pod: Pod | None = None) -> str | None:
        """The CA an HTTPS gateway's certificate chains to (None for plain HTTP)."""
        pod = pod or next(p for p in self.pods if p.kind == "gateway")
        env = self.localizer.environment(pod)
        return env.get("ODRADEK_CLIENT_SSL_TRUSTSTORE_LOCATION") if self.https(pod) else None

    @staticmethod
    def https(pod: Pod) -> bool:
        return pod.env["ODRADEK_LISTENERS"].lower().startswith("https://")

    def log(self, pod: Pod) -> Path:
        return self.log_dir / f"{pod.name}.log"

    def serving(self, pod: Pod) -> bool:
        status = self.processes[pod.name].poll()
        if status is not None:
            pytest.fail(f"{pod.name} exited with status {status}:\n{log_tail(self.log(pod), 40)}")
        if pod.kind == "gateway":
            return http_ready(f"{self.gateway_url(pod)}/health", cafile=self.gateway_cafile(pod))
        return check_health(f"127.0.0.1:{self.localizer.listen_port(pod)}", timeout_ms=1000, tls=self.tls(pod))

    def gateway_url(self, pod: Pod | None = None) -> str:
        pod = pod or next(p for p in self.pods if p.kind == "gateway")
        return f"{'https' if self.https(pod) else 'http'}://127.0.0.1:{self.localizer.listen_port(pod)}"

    def metrics_url(self, pod: Pod) -> str:
        return f"http://127.0.0.1:{self.localizer.port(pod, int(pod.env['ODRADEK_METRICS_PORT']))}/metrics"

    def stop(self) -> None:
        """SIGTERM to the pods of one kind at once (gateways first, controllers last), waiting for
        them before the next kind; SIGKILL to any still running after STOP_TIMEOUT_S (brokers
        stopping together cannot hand their leadership to each other, and would retry)."""
        for kind in reversed(KIND_ORDER):
            running = [self.processes[p.name] for p in self.pods if p.kind == kind and p.name in self.processes]
            for process in running:
                if process.poll() is None:
                    process.terminate()
            for process in running:
                stop_process(process, timeout_s=STOP_TIMEOUT_S)

    def dump_logs(self) -> str:
        return "\n".join(f"----- {pod.name} -----\n{log_tail(self.log(pod), 60)}" for pod in self.pods)


@pytest.fixture
def deploy(request: pytest.FixtureRequest, zookeeper, zk_chroot: str, tmp_path: Path) -> Iterator:
    deployments: list[Deployment] = []

    def run(pods: list[Pod], zookeeper_hosts: set[str],
            secrets: dict[str, dict[str, bytes]] | None = None) -> Deployment:
        localizer = Localizer(pods, zookeeper_hosts, zookeeper.connect_string + zk_chroot, tmp_path / "data")
        deployment = Deployment(pods, localizer, tmp_path / "logs", secrets)
        deployments.append(deployment)
        deployment.start()
        return deployment

    yield run
    report = getattr(request.node, "rep_call", None)
    for deployment in deployments:
        if report is None or report.failed:
            print(f"\n===== service logs =====\n{deployment.dump_logs()}")
        deployment.stop()


def check_cluster(deployment: Deployment, broker_ids: set[int], replication_factor: int) -> None:
    for pod in deployment.pods:
        if pod.kind != "gateway":
            assert http_ready(deployment.metrics_url(pod)), f"{pod.name}: no metrics"
    with httpx.Client(base_url=deployment.gateway_url(), timeout=20, headers={"Content-Type": V2},
                      verify=deployment.gateway_cafile() or True) as http:
        cluster_id = http.get("/v3/clusters").json()["data"][0]["cluster_id"]

        def registered() -> bool:
            listed = http.get(f"/v3/clusters/{cluster_id}/brokers").json()["data"]
            return {b["broker_id"] for b in listed} == broker_ids

        wait_until(registered, 30, 0.2, message=f"brokers {sorted(broker_ids)} to register")
        topic = f"deployed-{uuid.uuid4().hex[:8]}"
        created = http.post(f"/v3/clusters/{cluster_id}/topics", json={
            "topic_name": topic, "partitions_count": 3, "replication_factor": replication_factor},
            headers={"Content-Type": "application/json"})
        assert created.status_code == 201, created.text
        values = [{"n": n} for n in range(RECORDS)]

        def produced() -> bool:
            reply = http.post(f"/topics/{topic}", json={"records": [{"value": v} for v in values]},
                              headers={"Content-Type": JSON_EMBEDDED})
            return reply.status_code == 200 and all(o.get("error_code") is None for o in reply.json()["offsets"])

        wait_until(produced, 30, 0.5, message=f"records produced to {topic}")
        instance = http.post("/consumers/deploy-check", json={"format": "json", "auto.offset.reset": "earliest"})
        assert instance.status_code == 200, instance.text
        base = instance.json()["base_uri"]
        assert base.split("://")[0] == deployment.gateway_url().split("://")[0], base  # https on an https gateway
        assert http.post(f"{base}/subscription", json={"topics": [topic]}).status_code == 204
        seen: list[dict] = []
        deadline = time.monotonic() + 40
        while len(seen) < RECORDS and time.monotonic() < deadline:
            reply = http.get(f"{base}/records", params={"timeout": 1000}, headers={"Accept": JSON_EMBEDDED})
            assert reply.status_code == 200, reply.text
            seen.extend(record["value"] for record in reply.json())
        assert sorted(seen, key=lambda v: v["n"]) == values
        assert http.delete(base).status_code == 204


def test_docker_compose_services_form_a_cluster(deploy):
    entrypoint, cmd = image_command()
    pods, zookeeper_hosts = compose_pods(compose_config(), entrypoint, cmd)
    assert sorted(p.kind for p in pods) == sorted(["controller"] * 2 + ["broker"] * 3 + ["coordinator"] * 2
                                                  + ["gateway"])
    deployment = deploy(pods, zookeeper_hosts)
    check_cluster(deployment, {1, 2, 3}, replication_factor=3)


def test_docker_compose_secure_services_form_a_secured_cluster(deploy, tmp_path):
    """docker-compose.secure.yml over docker-compose.yml, with the certificates `odradek dev certs`
    makes by default mounted where each container sees them."""
    tls = tmp_path / "tls"
    result = subprocess.run([*console_script_argv(["odradek"]), "dev", "certs", "--out", str(tls),
                             "--files-at", "/etc/odradek/tls"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    entrypoint, cmd = image_command()
    pods, zookeeper_hosts = compose_pods(secure_compose_config(tls), entrypoint, cmd)
    for pod in pods:
        pod.secrets["/etc/odradek/tls"] = "tls"
    files = {path.name: path.read_bytes() for path in tls.iterdir()}
    deployment = deploy(pods, zookeeper_hosts, {"tls": files})
    for pod in deployment.pods:
        if pod.kind != "gateway":
            assert not check_health(f"127.0.0.1:{deployment.localizer.listen_port(pod)}", timeout_ms=1000)
    check_cluster(deployment, {1, 2, 3}, replication_factor=3)


def test_kubernetes_dev_overlay_pods_form_a_cluster(deploy):
    entrypoint, _ = image_command()
    pods, zookeeper_hosts = k8s_pods(render_kustomize(K8S_DEV), entrypoint)
    assert sorted(p.kind for p in pods) == sorted(KIND_ORDER)
    deployment = deploy(pods, zookeeper_hosts)
    check_cluster(deployment, {0}, replication_factor=1)


def test_kubernetes_base_pods_form_a_cluster(deploy):
    entrypoint, _ = image_command()
    pods, zookeeper_hosts = k8s_pods(render_kustomize(K8S_BASE), entrypoint)
    assert sorted(p.kind for p in pods) == sorted(["controller"] * 2 + ["broker"] * 3 + ["coordinator"] * 2
                                                  + ["gateway"] * 2)
    deployment = deploy(pods, zookeeper_hosts)
    check_cluster(deployment, {0, 1, 2}, replication_factor=3)


def test_kubernetes_secure_overlay_pods_form_a_secured_cluster(deploy, tmp_path):
    """The secure overlay (rendered from a copy whose CA `odradek dev certs` made): each pod's init
    container issues its certificate from the CA Secret, every gRPC listener takes mutual TLS only,
    and the gateways serve HTTPS with the CA's certificates."""
    entrypoint, _ = image_command()
    docs = render_kustomize(secure_overlay(tmp_path / "k8s"))
    secrets = {doc["metadata"]["name"]: {name: base64.b64decode(value) for name, value in doc["data"].items()}
               for doc in docs if doc["kind"] == "Secret"}
    pods, zookeeper_hosts = k8s_pods(docs, entrypoint)
    assert all(pod.init and pod.secrets for pod in pods)
    deployment = deploy(pods, zookeeper_hosts, secrets)
    for pod in deployment.pods:
        if pod.kind != "gateway":
            port = deployment.localizer.listen_port(pod)
            assert deployment.tls(pod) is not None, f"{pod.name} serves no TLS"
            assert not check_health(f"127.0.0.1:{port}", timeout_ms=1000), f"{pod.name} answered without TLS"
    assert deployment.gateway_url().startswith("https://")
    check_cluster(deployment, {0, 1, 2}, replication_factor=3)
