"""Health probes of a running service: a gRPC service's standard health check (`check_health`) and
an HTTP endpoint's readiness (`http_ready`). Used by the container entry point's health command, the
development launcher and the clients' transport."""

from __future__ import annotations

import ssl
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.security.tls import TlsSettings
from services.common.service import node_channel


def check_health(target: str, timeout_ms: float = 1000, tls: TlsSettings | None = None) -> bool:
    """True when the gRPC health service at `target` answers SERVING (on a channel of its own,
    over TLS with `tls`)."""
    channel = node_channel(target, tls)
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""),
                                                         timeout=max(timeout_ms, 1) / 1000)
        return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False
    finally:
        channel.close()


def http_ready(url: str, timeout_s: float = 2.0, cafile: str | None = None) -> bool:
    """Whether GET `url` answers 200 (an https:// one verified against `cafile`'s CAs)."""
    context = ssl.create_default_context(cafile=cafile) if url.startswith("https://") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=context) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False
