"""`python -m services.coordinator --config coordinator.properties [--override key=value ...]`"""

from __future__ import annotations

import sys

from services.common.service import run_service
from services.coordinator.config import CoordinatorServiceConfig
from services.coordinator.server import CoordinatorServer


def main(argv: list[str] | None = None) -> int:
    return run_service("coordinator", "Odradek coordinator: consumer groups and committed offsets.",
                       CoordinatorServiceConfig, CoordinatorServer, "coordinator_id", argv)


if __name__ == "__main__":
    sys.exit(main())
