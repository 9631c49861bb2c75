"""The security of a secured development cluster (`odradek dev up --secure`, `LocalCluster(secure=True)`).

Under `<base_dir>/tls/` a local CA (`ca.pem`, `ca.key`) signs a certificate for every service
(`CN=<service name>`, for its host's address, `localhost` and 127.0.0.1) and one for the
administrator (`CN=admin`). Every service then serves gRPC over mutual TLS (`listeners=SSL://`,
`ssl.client.auth=required`), its Kafka listener as SASL_SSL, each gateway HTTPS (its clients
reaching the services with its own certificate), and runs the ACL authorizer with every
service and the administrator in `super.users`; the coordinators authenticate to the brokers'
Kafka listeners with SASL/PLAIN as `admin`. A SCRAM-SHA-512 user `admin` is what Kafka clients log
in as (`add_admin_scram_user`). `client_settings` are Kafka's client keys for Odradek's clients and
confluent-kafka, written to `<base_dir>/client.properties`.

ZooKeeper, unless kept in plaintext, serves only TLS with its own certificate (`CN=zookeeper`) and
requires clients' certificates (`zookeeper_server_tls`); every service connects to it with its own
certificate through Kafka's `zookeeper.ssl.*` keys (`zookeeper_client_settings`), and tools with
`--zk-tls-config-file <base_dir>/zookeeper-tls.properties`, which holds the administrator's.

`write_certificates` is the same CA and certificates for containers (`odradek dev certs`): a
directory of them for compose's secured variant and the Kubernetes secure overlay, whose services
name the files where the directory is mounted.
"""

from __future__ import annotations

from pathlib import Path

from services.common.security.certs import CertificateAuthority
from services.common.security.sasl import make_scram_credential
from services.common.zk.client import OdradekZkClient
from services.common.zk.connect import ZkClientTls
from services.devcluster.zookeeper import ZooKeeperTls

ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-secret"
KAFKA_SECURITY_PROTOCOL = "SASL_SSL"
SCRAM_MECHANISM = "SCRAM-SHA-512"
AUTHORIZER_CLASS_NAME = "kafka.security.authorizer.AclAuthorizer"
ZOOKEEPER_IDENTITY = "zookeeper"
ZOOKEEPER_TLS_CONFIG_NAME = "zookeeper-tls.properties"
ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'username="{ADMIN_USER}" password="{ADMIN_PASSWORD}" user_{ADMIN_USER}="{ADMIN_PASSWORD}";')


def tls_dir(base_dir: Path) -> Path:
    return Path(base_dir) / "tls"


def ca_path(base_dir: Path) -> Path:
    return tls_dir(base_dir) / "ca.pem"


def keystore_path(base_dir: Path, identity: str) -> Path:
    return tls_dir(base_dir) / f"{identity}.keystore.pem"


def make_certificates(base_dir: Path, service_hosts: dict[str, str]) -> None:
    """The CA and a certificate per service (name -> the address it binds) and for the
    administrator; existing ones are kept, so a restarted cluster keeps its trust."""
    write_certificates(tls_dir(base_dir), {**{name: [host] for name, host in service_hosts.items()},
                                           ADMIN_USER: ["127.0.0.1"]})


def write_certificates(directory: Path, identities: dict[str, list[str]], ca_dir: Path | None = None) -> list[str]:
    """A certificate `CN=<name>` per identity (name -> the host names and addresses it is reached at;
    localhost and 127.0.0.1 are added), signed by the CA in `ca_dir` (default `directory`: made there
    when absent). Existing certificates are kept. Returns the names issued now."""
    directory = Path(directory)
    ca_dir = Path(ca_dir) if ca_dir is not None else directory
    ca_key, ca_certificate = ca_dir / "ca.key", ca_dir / "ca.pem"
    if ca_key.exists() and ca_certificate.exists():
        ca = CertificateAuthority.load(ca_key, ca_certificate)
    elif ca_dir == directory:
        ca = CertificateAuthority.create("Odradek development CA")
        ca.write(ca_key, ca_certificate)
    else:
        raise FileNotFoundError(f"no CA in {ca_dir} (ca.pem and ca.key)")
    if ca_dir != directory:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "ca.pem").write_bytes(ca.certificate_pem)
    issued = []
    for identity, hosts in identities.items():
        if not (directory / f"{identity}.keystore.pem").exists():
            ca.issue_files(directory, identity, [*hosts, "localhost", "127.0.0.1"])
            issued.append(identity)
    return issued


def service_settings(base_dir: Path, name: str, service_names: list[str]) -> dict[str, str]:
    """The keys that secure service `name` (its listeners' protocol is set by the launcher)."""
    super_users = ";".join(f"User:CN={n}" for n in [*service_names, ADMIN_USER]) + f";User:{ADMIN_USER}"
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore_path(base_dir, name)),
        "ssl.truststore.location": str(ca_path(base_dir)),
        "ssl.client.auth": "required",
        "authorizer.class.name": AUTHORIZER_CLASS_NAME,
        "super.users": super_users,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": ADMIN_JAAS,
    }


def gateway_settings(base_dir: Path, name: str) -> dict[str, str]:
    """An HTTPS gateway whose clients reach the services over mutual TLS as `CN=<name>`."""
    keystore = str(keystore_path(base_dir, name))
    return {"ssl.keystore.location": keystore, "client.security.protocol": "SSL",
            "client.ssl.truststore.location": str(ca_path(base_dir)), "client.ssl.keystore.location": keystore}


def client_settings(base_dir: Path, identity: str = ADMIN_USER) -> dict[str, str]:
    """Kafka client keys that reach the secured cluster as `identity`: TLS with its certificate
    (Odradek's gRPC clients), SASL_SSL with SCRAM-SHA-512 (Kafka clients on the Kafka listeners)."""
    return certificate_client_settings(tls_dir(base_dir), identity)


def certificate_client_settings(directory: Path | str, identity: str = ADMIN_USER) -> dict[str, str]:
    """`client_settings` for the certificates of `directory` (a path as the client sees it)."""
    directory = Path(directory)
    return {
        "security.protocol": KAFKA_SECURITY_PROTOCOL,
        "ssl.ca.location": str(directory / "ca.pem"),
        "ssl.certificate.location": str(directory / f"{identity}.pem"),
        "ssl.key.location": str(directory / f"{identity}.key"),
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.username": ADMIN_USER,
        "sasl.password": ADMIN_PASSWORD,
    }


def grpc_client_settings(settings: dict[str, str]) -> dict[str, str]:
    """Odradek's tools over gRPC from `client_settings`: TLS with the certificate, no SASL."""
    tls_only = {k: v for k, v in settings.items() if not k.startswith("sasl.")}
    return {**tls_only, "security.protocol": "SSL"} if tls_only else {}


def write_client_properties(kafka_path: Path, odradek_path: Path, settings: dict[str, str]) -> None:
    """`settings` as Kafka clients' properties file, and their gRPC form for Odradek's tools."""
    kafka_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    odradek_path.write_text("".join(f"{k}={v}\n" for k, v in grpc_client_settings(settings).items()))


def add_admin_scram_user(zk: OdradekZkClient) -> None:
    """The administrator's SCRAM-SHA-512 credential in ZooKeeper, as `odradek configs` writes it."""
    credential = make_scram_credential(SCRAM_MECHANISM, ADMIN_PASSWORD)
    zk.set_user_config(ADMIN_USER, {**zk.get_user_config(ADMIN_USER), SCRAM_MECHANISM: credential.encode()})


def zookeeper_server_tls(base_dir: Path) -> ZooKeeperTls:
    """ZooKeeper's TLS port: its certificate, the CA, and the administrator's for its health check."""
    return ZooKeeperTls(keystore=keystore_path(base_dir, ZOOKEEPER_IDENTITY), truststore=ca_path(base_dir),
                        client_keystore=keystore_path(base_dir, ADMIN_USER))


def zookeeper_client_settings(base_dir: Path, identity: str) -> dict[str, str]:
    """Kafka's keys that connect `identity` to ZooKeeper's TLS port with its certificate."""
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keystore.location": str(keystore_path(base_dir, identity)),
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(ca_path(base_dir)),
        "zookeeper.ssl.truststore.type": "PEM",
    }


def zookeeper_client_tls(base_dir: Path, identity: str = ADMIN_USER) -> ZkClientTls:
    return ZkClientTls(keystore_location=str(keystore_path(base_dir, identity)),
                       truststore_location=str(ca_path(base_dir)))


def write_zookeeper_tls_config(base_dir: Path) -> Path:
    """`<base_dir>/zookeeper-tls.properties`: the administrator's keys for tools' `--zk-tls-config-file`."""
    path = Path(base_dir) / ZOOKEEPER_TLS_CONFIG_NAME
    lines = [f"{key}={value}" for key, value in zookeeper_client_settings(base_dir, ADMIN_USER).items()]
    path.write_text("\n".join(lines) + "\n")
    return path
