"""`python -m services.gateway --config gateway.properties [--override key=value ...]`: the HTTP
gateway under uvicorn, on `listeners` (http://0.0.0.0:8080 by default)."""

from __future__ import annotations

import sys

import uvicorn

from services.common.config import ConfigError
from services.common.logging_setup import configure_logging
from services.common.service import service_arguments
from services.gateway.app import create_app, listener_address
from services.gateway.config import GatewayConfig


def main(argv: list[str] | None = None) -> int:
    args = service_arguments("Odradek HTTP gateway: REST Proxy v2/v3 and Arrow range reads.", argv)
    try:
        config = GatewayConfig.load(*([args.config] if args.config else []), args.overrides)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    configure_logging(f"gateway-{config.gateway_id}")
    host, port = listener_address(config.listeners)
    uvicorn.run(create_app(config), host=host, port=port, log_config=None, access_log=False,
                timeout_graceful_shutdown=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
