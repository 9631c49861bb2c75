"""The local CA: certificates it signs verify against it, carry the identity and hosts, and
authenticate both ends of a TLS connection."""

import socket
import ssl
import threading

from cryptography import x509

from services.common.security.certs import CertificateAuthority, subject_principal


def test_issued_certificate_names_its_identity_and_hosts(tmp_path):
    ca = CertificateAuthority.create()
    issued = ca.issue("broker-1", ["localhost", "127.0.0.1", "broker-1.odradek"])
    certificate = x509.load_pem_x509_certificate(issued.certificate_pem)
    certificate.verify_directly_issued_by(ca.certificate)
    san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "broker-1.odradek"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert subject_principal(issued.certificate_pem) == "User:CN=broker-1"


def test_written_files_reload_and_keys_are_private(tmp_path):
    ca = CertificateAuthority.create()
    files = ca.write(tmp_path / "ca.key", tmp_path / "ca.pem")
    assert oct(files.key_path.stat().st_mode & 0o777) == "0o600"
    again = CertificateAuthority.load(files.key_path, files.certificate_path)
    assert again.certificate == ca.certificate
    issued = ca.issue_files(tmp_path, "alice")
    assert issued.key_path.name == "alice.key" and oct(issued.key_path.stat().st_mode & 0o777) == "0o600"


def test_mutual_tls_handshake_with_the_issued_pairs(tmp_path):
    ca = CertificateAuthority.create()
    ca_path = ca.write(tmp_path / "ca.key", tmp_path / "ca.pem").certificate_path
    server_files = ca.issue_files(tmp_path, "broker-1")
    client_files = ca.issue_files(tmp_path, "alice")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca_path)
    server_context.load_cert_chain(server_files.certificate_path, server_files.key_path)
    server_context.verify_mode = ssl.CERT_REQUIRED
    client_context = ssl.create_default_context(cafile=ca_path)
    client_context.load_cert_chain(client_files.certificate_path, client_files.key_path)

    listener = socket.create_server(("127.0.0.1", 0))
    seen = {}

    def serve():
        connection, _ = listener.accept()
        with server_context.wrap_socket(connection, server_side=True) as tls:
            seen["peer"] = tls.getpeercert()["subject"]
            tls.sendall(b"ok")

    thread = threading.Thread(target=serve)
    thread.start()
    with socket.create_connection(listener.getsockname(), timeout=5) as raw, \
            client_context.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.recv(2) == b"ok"
    thread.join(5)
    listener.close()
    assert seen["peer"] == ((("commonName", "alice"),),)
