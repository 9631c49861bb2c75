"""The import contracts of `make lint` (pyproject.toml's [tool.importlinter]) catch a forbidden
import: they are run on a small tree of the same packages, first clean, then with one import that
breaks a layer."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["odradek", "services", "services.common", "services.broker", "services.controller",
            "services.coordinator", "services.clients", "services.gateway", "services.devcluster"]
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent))


def contracts_config() -> str:
    section = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ["[importlinter]", "root_packages =\n    " + "\n    ".join(section["root_packages"]),
             f"include_external_packages = {section['include_external_packages']}"]
    for index, contract in enumerate(section["contracts"]):
        lines.append(f"\n[importlinter:contract:{index}]")
        for key, value in contract.items():
            if isinstance(value, list):
                lines.append(f"{key} =\n    " + "\n    ".join(value))
            else:
                lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def make_tree(root: Path) -> None:
    for package in PACKAGES:
        directory = root.joinpath(*package.split("."))
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "__init__.py").write_text("")
    (root / "services" / "common" / "errors.py").write_text("")
    (root / "services" / "gateway" / "app.py").write_text("from services.clients import admin\n")
    (root / "services" / "clients" / "admin.py").write_text("from services.common import errors\n")
    (root / "services" / "broker" / "servicer.py").write_text("from services.common import errors\n")
    (root / "setup.cfg").write_text(contracts_config())


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT_IMPORTS, "--no-cache", "--config", str(root / "setup.cfg")], cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(LINT_IMPORTS is None, reason="import-linter is not installed")
@pytest.mark.parametrize("module, forbidden", [
    ("services/common/bad.py", "services.gateway.app"),
    ("services/broker/bad.py", "services.controller"),
    ("services/gateway/bad.py", "services.broker.servicer"),
    ("services/clients/bad.py", "services.gateway.app"),
    ("odradek/bad.py", "services.broker.servicer"),
])
def test_a_forbidden_import_is_caught(tmp_path, module, forbidden):
    make_tree(tmp_path)
    clean = lint(tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    (tmp_path / module).write_text(f"import {forbidden}\n")
    broken = lint(tmp_path)
    importer = module.removesuffix(".py").replace("/", ".")
    assert broken.returncode != 0
    assert f"{importer} -> {forbidden}" in broken.stdout, broken.stdout
