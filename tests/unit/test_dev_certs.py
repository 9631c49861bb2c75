"""`odradek dev certs`: the CA and the certificates docker-compose.secure.yml and the Kubernetes secure
overlay mount: one per compose service and the administrator by default, for the names given, kept
when present; signed by another directory's CA with `--ca` (the overlay's init containers)."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from services.clients.cli import main
from services.common.config import load_properties
from services.devcluster.cli import COMPOSE_SERVICES


def certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def names(cert: x509.Certificate) -> set[str]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {*san.get_values_for_type(x509.DNSName), *map(str, san.get_values_for_type(x509.IPAddress))}


def test_the_default_is_every_compose_service_and_admin_with_client_settings_where_mounted(tmp_path, capsys):
    out = tmp_path / "tls"
    assert main(["dev", "certs", "--out", str(out), "--files-at", "/etc/odradek/tls"]) == 0
    ca = certificate(out / "ca.pem")
    for service in [*COMPOSE_SERVICES, "admin"]:
        cert = certificate(out / f"{service}.pem")
        cert.verify_directly_issued_by(ca)
        assert cert.subject.rfc4514_string() == f"CN={service}"
        assert names(cert) == ({service} if service != "admin" else set()) | {"localhost", "127.0.0.1"}
        assert (out / f"{service}.keystore.pem").stat().st_mode & 0o077 == 0  # the key: its owner only
    assert load_properties(out / "odradek-client.properties") == {
        "security.protocol": "SSL", "ssl.ca.location": "/etc/odradek/tls/ca.pem",
        "ssl.certificate.location": "/etc/odradek/tls/admin.pem", "ssl.key.location": "/etc/odradek/tls/admin.key"}
    assert load_properties(out / "client.properties")["security.protocol"] == "SASL_SSL"
    capsys.readouterr()
    assert main(["dev", "certs", "--out", str(out)]) == 0
    assert "(kept)" in capsys.readouterr().out and certificate(out / "ca.pem") == ca


def test_a_pod_certificate_is_signed_by_the_ca_of_another_directory(tmp_path, capsys):
    ca_dir, out = tmp_path / "ca", tmp_path / "pod"
    assert main(["dev", "certs", "--out", str(out), "--ca", str(ca_dir), "--identity", "x=h"]) == 1
    assert "no CA in" in capsys.readouterr().out
    assert main(["dev", "certs", "--out", str(ca_dir), "--identity", "admin"]) == 0
    assert main(["dev", "certs", "--out", str(out), "--ca", str(ca_dir), "--identity",
                 "odradek-broker=odradek-broker-0.odradek-broker.odradek.svc,10.244.1.7"]) == 0
    cert = certificate(out / "odradek-broker.pem")
    cert.verify_directly_issued_by(certificate(ca_dir / "ca.pem"))
    assert names(cert) == {"odradek-broker-0.odradek-broker.odradek.svc", "10.244.1.7", "localhost", "127.0.0.1"}
    assert (out / "ca.pem").read_bytes() == (ca_dir / "ca.pem").read_bytes() and not (out / "ca.key").exists()
