"""A `ServiceRuntime` serving over TLS with a SCRAM password verifier, for the tests of what clients
send to a secured gRPC listener."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from services.common.security.certs import CertificateAuthority
from services.common.security.grpc_credentials import PasswordVerifier
from services.common.security.tls import TlsSettings
from services.common.service import ServiceRuntime


@dataclass(frozen=True)
class TlsRuntime:
    runtime: ServiceRuntime
    target: str  # host:port, with the host name the server's certificate names
    ca_path: str


@contextlib.contextmanager
def tls_runtime(tmp_path: Path, name: str, password_verifier: PasswordVerifier) -> Iterator[TlsRuntime]:
    """A started, serving runtime with a certificate of a new CA; shut down on exit."""
    ca = CertificateAuthority.create()
    ca_path = str(ca.write(tmp_path / "ca.key", tmp_path / "ca.pem").certificate_path)
    server = ca.issue_files(tmp_path, "broker-1")
    runtime = ServiceRuntime(name, "127.0.0.1:0", max_workers=2,
                             tls=TlsSettings.load(str(server.keystore_path), ca_path))
    runtime.password_verifier = password_verifier
    target = f"localhost:{runtime.start()}"
    runtime.set_serving(True)
    try:
        yield TlsRuntime(runtime, target, ca_path)
    finally:
        runtime.shutdown(grace_s=0.1)
