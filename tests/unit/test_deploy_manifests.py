"""The deployment files, checked offline: the Dockerfile's stages and instructions; the compose file
against the Compose specification (docker-compose 1.29's bundled schema, no engine needed) and
its topology; every Kubernetes manifest of the base and of the dev and secure overlays against
Kubernetes' schemas (kubernetes-validate, strict, Kubernetes 1.30) and their shape; and every `ODRADEK_*`
variable in any of them names a key of the service that reads it. And the wheel the image installs:
its top-level packages (`odradek` and `services`), PySpark only as the `spark` extra, and its data files."""

from __future__ import annotations

import fnmatch
import inspect
import shutil
import subprocess
import tomllib

import pytest
import setuptools
from kubernetes_validate import ValidationError, validate

from services.broker.config import BrokerConfig
from services.common.entrypoint import SERVICES, check_environment
from services.common.service import ServiceRuntime
from services.devcluster.cli import COMPOSE_SERVICES
from tests.deploy_support import (
    COMPOSE_FILE,
    K8S_BASE,
    K8S_DEV,
    K8S_SECURE,
    REPO_ROOT,
    compose_config,
    compose_pods,
    console_scripts,
    dockerfile_stages,
    exec_form,
    image_command,
    k8s_pods,
    last,
    render_kustomize,
    secure_compose_config,
    secure_overlay,
)

KUBERNETES_VERSION = "1.30.0"
WHEEL_PACKAGES = ("odradek", "services")  # the top-level packages `pip install odradek` installs
# the gRPC server's grace once the shutdown hooks (the controlled shutdown) have run
GRPC_SHUTDOWN_GRACE_S = inspect.signature(ServiceRuntime.run_until_stopped).parameters["grace_s"].default


@pytest.fixture(scope="module")
def base() -> list[dict]:
    return render_kustomize(K8S_BASE)


@pytest.fixture(scope="module")
def dev() -> list[dict]:
    return render_kustomize(K8S_DEV)


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> list[dict]:
    """The secure overlay, rendered from a copy whose CA `odradek dev certs` made."""
    return render_kustomize(secure_overlay(tmp_path_factory.mktemp("k8s") / "k8s"))


def by_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def pod_spec(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


# ------------------------------------------------------------------------------------------- Dockerfile


def test_the_dockerfile_builds_a_wheel_and_runs_slim_as_non_root():
    stages = dockerfile_stages()
    assert set(stages) == {"builder", "runtime", "spark"}
    assert any("pip wheel" in args and " . " in f"{args} " for name, args in stages["builder"] if name == "RUN")
    runtime = stages["runtime"]
    assert runtime[0] == ("FROM", "python:3.11-slim AS runtime")
    user = last(runtime, "USER")
    assert user and user.split(":")[0] not in ("root", "0")
    entrypoint, cmd = image_command()
    assert entrypoint == ["odradek-service"] and entrypoint[0] in console_scripts()
    assert cmd[0] in SERVICES
    healthcheck = last(runtime, "HEALTHCHECK")
    assert healthcheck and exec_form(healthcheck.split("CMD", 1)[1].strip()) == ["odradek-service", "health"]
    runtime_text = " ".join(args for _, args in runtime).lower()
    assert "jre" not in runtime_text and "java" not in runtime_text
    assert "default-jre-headless" in " ".join(args for _, args in stages["spark"])
    assert (REPO_ROOT / ".dockerignore").is_file()


# ------------------------------------------------------------------------------------------- compose


def test_the_compose_file_is_valid_compose():
    docker_compose = shutil.which("docker-compose")
    if docker_compose is None:
        pytest.fail("docker-compose is not installed: `make system-deps` installs Debian's docker-compose",
                    pytrace=False)
    result = subprocess.run([docker_compose, "-f", str(COMPOSE_FILE), "config", "-q"], capture_output=True,
                            text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr


def test_compose_validation_rejects_an_unknown_option(tmp_path):
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed: `make system-deps` installs it", pytrace=False)
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace("    hostname: broker-1\n",
                                                       "    hostname: broker-1\n    hostnme: broker-1\n"))
    result = subprocess.run(["docker-compose", "-f", str(broken), "config", "-q"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0 and "hostnme" in result.stderr


def test_the_compose_topology_matches_make_up():
    compose = compose_config()
    services = compose["services"]
    entrypoint, cmd = image_command()
    pods, zookeeper = compose_pods(compose, entrypoint, cmd)
    assert zookeeper == {"zookeeper"} and services["zookeeper"]["image"] == "zookeeper:3.8"
    kinds = sorted(p.kind for p in pods)
    assert kinds == sorted(["controller"] * 2 + ["broker"] * 3 + ["coordinator"] * 2 + ["gateway"])
    assert services["gateway"]["ports"] == ["8080:8080"]
    for pod in pods:
        service = services[pod.name]
        assert not any(arg.startswith("--") for arg in pod.argv), f"{pod.name}: configure by environment only"
        assert service["healthcheck"]["test"] == ["CMD", "odradek-service", "health"]
        for dependency, condition in service.get("depends_on", {}).items():
            assert condition == {"condition": "service_healthy"}, (pod.name, dependency)
            assert "healthcheck" in services[dependency]
        if pod.kind == "broker":
            volume = service["volumes"][0].split(":")[0]
            assert volume in compose["volumes"] and pod.env["ODRADEK_LOG_DIRS"].startswith(pod.mounts[0])
    assert services["clickstream"]["profiles"] == ["pipeline"]
    assert services["clickstream"]["build"]["target"] == "spark"


def test_every_compose_variable_names_a_key_of_its_service():
    entrypoint, cmd = image_command()
    for pod in compose_pods(compose_config(), entrypoint, cmd)[0]:
        kind = SERVICES[pod.kind]
        check_environment(kind, kind.load_config_class(), pod.env)


def test_the_secure_compose_file_secures_every_listener_with_the_services_certificates(tmp_path):
    entrypoint, cmd = image_command()
    pods, _ = compose_pods(secure_compose_config(tmp_path), entrypoint, cmd)
    assert sorted(p.kind for p in pods) == sorted(["controller"] * 2 + ["broker"] * 3 + ["coordinator"] * 2
                                                  + ["gateway"])
    for pod in pods:
        kind = SERVICES[pod.kind]
        check_environment(kind, kind.load_config_class(), pod.env)
        assert "/etc/odradek/tls" in pod.mounts
        assert pod.env["ODRADEK_LISTENERS"].startswith("https://" if pod.kind == "gateway" else "SSL://")
        assert pod.env["ODRADEK_SSL_KEYSTORE_LOCATION"] == f"/etc/odradek/tls/{pod.name}.keystore.pem"
        assert pod.env.get("ODRADEK_KAFKA_LISTENERS", "SASL_SSL://").startswith("SASL_SSL://")
        if pod.kind != "gateway":
            assert pod.env["ODRADEK_SSL_CLIENT_AUTH"] == "required"
            assert f"User:CN={pod.name}" in pod.env["ODRADEK_SUPER_USERS"].split(";")
            assert pod.env["ODRADEK_ADVERTISED_LISTENERS"].startswith(f"SSL://{pod.name}:")
    assert set(COMPOSE_SERVICES) == {pod.name for pod in pods}, "odradek dev certs issues one per service"


# ------------------------------------------------------------------------------------------- Kubernetes


@pytest.mark.parametrize("rendered", ["base", "dev", "secure"])
def test_every_manifest_is_valid_kubernetes(rendered, request):
    docs = request.getfixturevalue(rendered)
    assert docs
    for doc in docs:
        try:
            validate(doc, KUBERNETES_VERSION, strict=True)
        except ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}")
        assert doc["kind"] == "Namespace" or doc["metadata"]["namespace"] == "odradek"


def test_the_validator_rejects_an_unknown_field(base):
    deployment = next(d for d in base if d["kind"] == "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(ValidationError):
        validate(broken, KUBERNETES_VERSION, strict=True)


def test_zookeeper_is_a_three_node_ensemble_with_ids_from_ordinals(base):
    zookeeper = by_kind(base, "StatefulSet")["odradek-zookeeper"]
    assert zookeeper["spec"]["replicas"] == 3 and zookeeper["spec"]["podManagementPolicy"] == "Parallel"
    container = pod_spec(zookeeper)["containers"][0]
    assert container["image"] == "zookeeper:3.8"
    assert "ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 ))" in container["command"][-1]
    servers = next(e["value"] for e in container["env"] if e["name"] == "ZOO_SERVERS").split()
    assert [s.split("=")[0] for s in servers] == ["server.1", "server.2", "server.3"]
    headless = by_kind(base, "Service")[zookeeper["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"]
    assert by_kind(base, "PodDisruptionBudget")["odradek-zookeeper"]["spec"] == {
        "minAvailable": 2, "selector": zookeeper["spec"]["selector"]}


def test_brokers_are_a_stateful_set_with_volumes_stable_addresses_and_spread(base):
    brokers = by_kind(base, "StatefulSet")["odradek-broker"]
    spec = pod_spec(brokers)
    assert brokers["spec"]["replicas"] == 3
    assert brokers["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert by_kind(base, "Service")[brokers["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert by_kind(base, "PodDisruptionBudget")["odradek-broker"]["spec"]["maxUnavailable"] == 1
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert "ODRADEK_BROKER_ID" not in env  # the entrypoint takes it from the pod ordinal


def test_broker_grace_period_covers_a_controlled_shutdown(base):
    defaults = BrokerConfig(broker_id=0, zookeeper_connect="zk:2181")
    needed_s = defaults.controlled_shutdown_max_retries * (
        defaults.request_timeout_ms + defaults.controlled_shutdown_retry_backoff_ms) / 1000 + GRPC_SHUTDOWN_GRACE_S
    grace_s = pod_spec(by_kind(base, "StatefulSet")["odradek-broker"])["terminationGracePeriodSeconds"]
    assert grace_s >= needed_s
    assert grace_s <= 2 * needed_s


def test_services_have_probes_resources_metrics_and_budgets(base):
    budgets = by_kind(base, "PodDisruptionBudget")
    services = by_kind(base, "Service")
    for workload in [*by_kind(base, "StatefulSet").values(), *by_kind(base, "Deployment").values()]:
        name, spec = workload["metadata"]["name"], pod_spec(workload)
        container = spec["containers"][0]
        assert container["resources"]["requests"] and container["resources"]["limits"], name
        assert spec["enableServiceLinks"] is False, f"{name}: service links would add ODRADEK_* variables"
        assert name in budgets, name
        if name == "odradek-zookeeper":
            continue
        probe = "httpGet" if name == "odradek-gateway" else "grpc"
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert probe in container[kind], (name, kind)
        ports = {p["name"] for p in container["ports"]}
        assert "metrics" in ports or (name == "odradek-gateway" and "http" in ports), name
        assert "metrics" in {p["name"] for p in services[name]["spec"]["ports"]}, name
        assert services[name]["metadata"]["labels"]["app.kubernetes.io/name"] == "odradek"
    for name in ("odradek-controller", "odradek-coordinator"):
        assert by_kind(base, "Deployment")[name]["spec"]["replicas"] == 2
        assert budgets[name]["spec"]["minAvailable"] == 1
    assert "odradek-gateway" in by_kind(base, "Ingress")


@pytest.mark.parametrize("rendered", ["base", "dev", "secure"])
def test_every_pod_variable_names_a_key_of_its_service(rendered, request):
    entrypoint, _ = image_command()
    pods, _ = k8s_pods(request.getfixturevalue(rendered), entrypoint)
    assert {p.kind for p in pods} == set(SERVICES)
    for pod in pods:
        kind = SERVICES[pod.kind]
        check_environment(kind, kind.load_config_class(), pod.env)


def test_service_links_would_be_refused_by_the_entrypoint(base):
    entrypoint, _ = image_command()
    linked = [dict(d) for d in base]
    for doc in linked:
        if doc["kind"] == "StatefulSet" and doc["metadata"]["name"] == "odradek-broker":
            template = doc["spec"]["template"]
            doc["spec"] = {**doc["spec"], "template": {**template, "spec": {**template["spec"],
                                                                            "enableServiceLinks": True}}}
    broker = next(p for p in k8s_pods(linked, entrypoint)[0] if p.kind == "broker")
    with pytest.raises(Exception, match="ODRADEK_BROKER_SERVICE_HOST|ODRADEK_BROKER_PORT"):
        check_environment(SERVICES["broker"], BrokerConfig, broker.env)


def test_the_dev_overlay_is_one_node(dev):
    for workload in [*by_kind(dev, "StatefulSet").values(), *by_kind(dev, "Deployment").values()]:
        assert workload["spec"]["replicas"] == 1, workload["metadata"]["name"]
        assert "affinity" not in pod_spec(workload)
    assert not by_kind(dev, "PodDisruptionBudget")
    config = {name: doc["data"] for name, doc in by_kind(dev, "ConfigMap").items()}
    assert config["odradek-broker"]["ODRADEK_DEFAULT_REPLICATION_FACTOR"] == "1"
    assert config["odradek-coordinator"]["ODRADEK_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    assert config["odradek-coordinator"]["ODRADEK_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"


def test_the_secure_overlay_secures_every_listener_with_a_certificate_of_each_pod(secure):
    entrypoint, _ = image_command()
    pods, _ = k8s_pods(secure, entrypoint)
    assert {p.kind for p in pods} == set(SERVICES)
    for pod in pods:
        listeners = pod.env["ODRADEK_LISTENERS"]
        assert listeners.startswith("https://" if pod.kind == "gateway" else "SSL://"), pod.name
        assert pod.env.get("ODRADEK_KAFKA_LISTENERS", "SASL_SSL://").startswith("SASL_SSL://"), pod.name
        keystore = pod.env["ODRADEK_SSL_KEYSTORE_LOCATION"]
        assert keystore.endswith(f"odradek-{pod.kind}.keystore.pem")
        if pod.kind != "gateway":
            assert pod.env["ODRADEK_SSL_CLIENT_AUTH"] == "required"
            assert f"User:CN=odradek-{pod.kind}" in pod.env["ODRADEK_SUPER_USERS"].split(";")
        (certs, _), = pod.init  # the pod's certificate, issued into the directory the keystore is in
        assert certs[:3] == ["odradek", "dev", "certs"] and keystore.rpartition("/")[0] in pod.mounts
        assert list(pod.secrets.values()) == [next(d for d in secure if d["kind"] == "Secret")["metadata"]["name"]]
    for workload in [*by_kind(secure, "StatefulSet").values(), *by_kind(secure, "Deployment").values()]:
        if workload["metadata"]["name"] == "odradek-zookeeper":
            continue
        container = pod_spec(workload)["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert "grpc" not in container[probe], "the kubelet's gRPC probe speaks no TLS"
            assert container[probe].get("httpGet", {}).get("scheme", "HTTPS") == "HTTPS"
    secret = next(d for d in secure if d["kind"] == "Secret")
    assert sorted(secret["data"]) == ["ca.key", "ca.pem"]
    assert (K8S_SECURE / ".gitignore").read_text().splitlines()[-1] == "ca/", "the CA key stays out of git"


def test_the_wheel_installs_odradek_and_services_only_and_pyspark_is_an_extra():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = setuptools.find_packages(str(REPO_ROOT), include=include)
    assert {package.partition(".")[0] for package in packages} == set(WHEEL_PACKAGES)
    assert not any(d.startswith("pyspark") for d in project["project"]["dependencies"])
    assert [d for d in project["project"]["optional-dependencies"]["spark"] if d.startswith("pyspark")]


def test_the_wheel_carries_every_file_the_packages_read():
    """The image installs the wheel, not the tree: a data file outside package-data would be missing."""
    patterns = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["*"]
    not_read = {".py", ".pyc", ".pyi", ".so", ".c", ".md"}
    for top in WHEEL_PACKAGES:
        for path in (REPO_ROOT / top).rglob("*"):
            if path.is_file() and path.suffix not in not_read and "__pycache__" not in path.parts:
                assert any(fnmatch.fnmatch(path.name, pattern.rpartition("/")[2]) for pattern in patterns), path


def test_the_pipeline_service_runs_a_command_of_the_clickstream_job():
    from jobs.clickstream.__main__ import build_parser

    stages = dockerfile_stages()
    assert exec_form(last(stages["spark"], "ENTRYPOINT")) == ["python", "-m", "jobs.clickstream"]
    # the wheel does not carry jobs/: the spark stage puts it on the path
    assert ("COPY", "jobs /opt/odradek/jobs") in stages["spark"] and last(stages["spark"], "ENV") == \
        "PYTHONPATH=/opt/odradek"
    command = compose_config()["services"]["clickstream"]["command"]
    arguments = build_parser().parse_args(command)
    assert arguments.command == "run" and arguments.gateway == "http://gateway:8080"
