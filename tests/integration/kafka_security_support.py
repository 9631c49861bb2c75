"""A cluster whose Kafka listeners are SASL_PLAINTEXT with the ACL authorizer on (`User:admin` a
super user with a PLAIN password, which the coordinator forwards its clients' requests as), SCRAM
users added with `odradek configs --entity-type users`, and the bare Kafka-protocol connections
the security tests log in with."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Iterator

from scramp import ScramClient

from services.clients.cli import main as odradek
from services.common.errors import Errors
from services.common.kafka_wire import kafka_error
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import TEST_BROKER_CONFIG, TEST_COORDINATOR_CONFIG, module_cluster
from tests.kafka_wire_support import WireConnection

DEADLINE_S = 20.0
SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
ADMIN_PASSWORD = "admin-secret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}";')
# the gRPC listeners are plaintext, so the nodes call each other as User:ANONYMOUS, a super user too,
# as Kafka's brokers on a PLAINTEXT inter-broker listener need
SECURITY = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}


@contextlib.contextmanager
def sasl_cluster(request, zookeeper, zk_root_client, tmp_path_factory, name: str,
                 users: dict[str, str]) -> Iterator[LocalCluster]:
    """One broker, one controller, one coordinator, every Kafka listener SASL_PLAINTEXT, with
    `users` (name -> password) as SCRAM-SHA-512 users; `cluster.zk_connect` names its chroot."""
    with module_cluster(request, zookeeper, zk_root_client, tmp_path_factory, name, brokers=1,
                        controllers=1, coordinators=1, kafka_security_protocol="SASL_PLAINTEXT",
                        broker_config={**TEST_BROKER_CONFIG, **SECURITY},
                        coordinator_config={**TEST_COORDINATOR_CONFIG, **SECURITY}) as cluster:
        zk = f"{zookeeper.connect_string}{cluster.chroot}"
        for user, password in users.items():
            assert run_cli("configs", "--zookeeper", zk, "--entity-type", "users", "--entity-name", user,
                           "--alter", "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={password}]") == (
                0, f"Completed updating config for user {user}.\n")
        cluster.zk_connect = zk
        yield cluster


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = odradek(list(argv))
    return code, out.getvalue()


def kafka_address(cluster: LocalCluster, name: str) -> tuple[str, int]:
    return cluster.host, cluster.services[name].kafka_port


def broker(cluster: LocalCluster) -> tuple[str, int]:
    return kafka_address(cluster, cluster.broker_names[0])


def coordinator(cluster: LocalCluster) -> tuple[str, int]:
    return kafka_address(cluster, cluster.coordinator_names[0])


def scram_connection(address: tuple[str, int], user: str, password: str) -> tuple[WireConnection, object]:
    """A connection that went through SaslHandshake v1 and SaslAuthenticate v2 with SCRAM-SHA-512;
    returns it with the last SaslAuthenticate answer (the first that failed, if one did)."""
    connection = WireConnection(*address)
    handshake = connection.call(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512")
    assert handshake.error_code == kafka_error(Errors.NONE) and "SCRAM-SHA-512" in handshake.mechanisms
    client = ScramClient(["SCRAM-SHA-512"], user, password)
    first = connection.call(SASL_AUTHENTICATE, 2, 2, auth_bytes=client.get_client_first().encode())
    if first.error_code != kafka_error(Errors.NONE):  # an unknown user fails at once
        return connection, first
    client.set_server_first(first.auth_bytes.decode())
    final = connection.call(SASL_AUTHENTICATE, 2, 3, auth_bytes=client.get_client_final().encode())
    if final.error_code == kafka_error(Errors.NONE):
        client.set_server_final(final.auth_bytes.decode())
    return connection, final


def plain_connection(address: tuple[str, int], user: str, password: str) -> WireConnection:
    """A connection logged in with SASL/PLAIN (SaslHandshake v1, SaslAuthenticate v2)."""
    connection = WireConnection(*address)
    handshake = connection.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
    assert handshake.error_code == kafka_error(Errors.NONE), handshake
    answer = connection.call(SASL_AUTHENTICATE, 2, 2, auth_bytes=f"\0{user}\0{password}".encode())
    assert answer.error_code == kafka_error(Errors.NONE), answer
    return connection


def closed(connection: WireConnection) -> bool:
    """Whether the listener closed the connection (within DEADLINE_S) without answering."""
    connection.sock.settimeout(DEADLINE_S)
    try:
        return connection.sock.recv(1) == b""
    except (TimeoutError, ConnectionError):
        return False


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting {DEADLINE_S} s for {what}")
        time.sleep(0.05)


def client_config(cluster: LocalCluster, user: str, password: str, **config: object) -> dict:
    return {"bootstrap.servers": cluster.kafka_bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password, **config}


def produce_and_read_in_a_group(config: dict, topic: str, group: str, count: int = 5) -> None:
    """confluent-kafka with `config` (bootstrap servers and security settings) produces `count`
    records to `topic` with acks=all, reads them back as a consumer in `group` and commits."""
    import confluent_kafka

    failures: list = []
    producer = confluent_kafka.Producer({**config, "acks": "all"})
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode(), on_delivery=lambda error, _: error and failures.append(error))
    assert producer.flush(DEADLINE_S) == 0 and not failures, failures
    consumer = confluent_kafka.Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []

        def read() -> bool:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
            return len(values) >= count
        wait_for(read, f"the consumer to read the {count} records")
        assert values == [f"record-{i}".encode() for i in range(count)]
        committed = consumer.commit(asynchronous=False)
        assert all(tp.error is None for tp in committed), committed
    finally:
        consumer.close()
