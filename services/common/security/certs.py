"""A local certificate authority and the certificates it signs, as PEM files.

`CertificateAuthority.create` makes a self-signed CA (an EC P-256 key); `issue` signs a
certificate for one identity: its subject is `CN=<name>` (a service's `broker-1`,
`controller-1001`, or a user's name), its subject alternative names are the host names and IP
addresses it is reached at, and it serves both as a TLS server and a TLS client certificate, so
one pair authenticates a service on its listeners and to the services it calls. `write` and
`issue_files` put the key and certificate in files a listener's `ssl.*` keys name; the keys are
unencrypted and readable by their owner only.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_VALIDITY_DAYS = 365
LOCAL_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class IssuedCertificate:
    key_pem: bytes
    certificate_pem: bytes


@dataclass(frozen=True)
class CertificateFiles:
    key_path: Path
    certificate_path: Path
    keystore_path: Path | None = None  # key and certificate in one file (`ssl.keystore.type=PEM`)


def _private_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _subject_alternative_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


class CertificateAuthority:
    def __init__(self, key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate) -> None:
        self.key = key
        self.certificate = certificate

    @classmethod
    def create(cls, name: str = "Odradek local CA", validity_days: int = DEFAULT_VALIDITY_DAYS) -> CertificateAuthority:
        key = _private_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=validity_days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
        return cls(key, certificate)

    @classmethod
    def load(cls, key_path: Path, certificate_path: Path) -> CertificateAuthority:
        key = serialization.load_pem_private_key(Path(key_path).read_bytes(), password=None)
        return cls(key, x509.load_pem_x509_certificate(Path(certificate_path).read_bytes()))

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def write(self, key_path: Path, certificate_path: Path) -> CertificateFiles:
        _write_private(Path(key_path), _key_pem(self.key))
        Path(certificate_path).write_bytes(self.certificate_pem)
        return CertificateFiles(Path(key_path), Path(certificate_path))

    def issue(self, common_name: str, hosts: Iterable[str] = LOCAL_HOSTS,
              validity_days: int = DEFAULT_VALIDITY_DAYS) -> IssuedCertificate:
        """A key and a certificate with subject `CN=<common_name>` for `hosts` (DNS names or IPs)."""
        key = _private_key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.certificate.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=validity_days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                           critical=False))
        names = _subject_alternative_names(hosts)
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        return IssuedCertificate(_key_pem(key), certificate.public_bytes(serialization.Encoding.PEM))

    def issue_files(self, directory: Path, common_name: str,
                    hosts: Iterable[str] = LOCAL_HOSTS) -> CertificateFiles:
        """`issue`, written as `<directory>/<common_name>.key`, `<common_name>.pem` and both in
        `<common_name>.keystore.pem`."""
        issued = self.issue(common_name, hosts)
        directory = Path(directory)
        key_path, certificate_path = directory / f"{common_name}.key", directory / f"{common_name}.pem"
        keystore_path = directory / f"{common_name}.keystore.pem"
        _write_private(key_path, issued.key_pem)
        _write_private(keystore_path, issued.key_pem + issued.certificate_pem)
        certificate_path.write_bytes(issued.certificate_pem)
        return CertificateFiles(key_path, certificate_path, keystore_path)


def subject_principal(certificate_pem: bytes) -> str:
    """Kafka's default principal for a client certificate: `User:` and its subject as RFC 2253
    writes it (`User:CN=alice`)."""
    return "User:" + x509.load_pem_x509_certificate(certificate_pem).subject.rfc4514_string()
