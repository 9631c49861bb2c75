"""The controller's core stays pure: no grpc, kazoo, generated stubs or network modules."""

from __future__ import annotations

import ast
from pathlib import Path

import services.controller.state as state_package

FORBIDDEN = ("grpc", "kazoo", "services.common.pb", "socket", "fastapi", "requests")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_io_imports():
    package_dir = Path(state_package.__file__).parent
    files = sorted(package_dir.glob("*.py"))
    assert len(files) > 10
    for path in files:
        for module in imported_modules(path):
            assert not module.startswith(FORBIDDEN), f"{path.name} imports {module}"


def test_modules_are_short_and_documented():
    package_dir = Path(state_package.__file__).parent
    for path in sorted(package_dir.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 400, path.name
        assert ast.get_docstring(ast.parse(text)), path.name
