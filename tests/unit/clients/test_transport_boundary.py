"""Every client RPC goes through `services.clients.transport`: no other module of the clients or of the
HTTP gateway imports grpc or a generated `*_pb2_grpc` stub module, or reaches a stub or channel of
the pool itself; and the public client classes never build protobuf messages: their modules import
no generated `*_pb2` module (the request modules beside them do that)."""

from __future__ import annotations

import ast
from pathlib import Path

import services.clients as clients_package
import services.clients.transport as transport_package
import services.gateway as gateway_package

CLIENTS_DIR = Path(clients_package.__file__).parent
SERVICES_DIR = CLIENTS_DIR.parent
GATEWAY_DIR = Path(gateway_package.__file__).parent
TRANSPORT_DIR = Path(transport_package.__file__).parent
GRPC_OWNER = TRANSPORT_DIR / "channels.py"
RAW_ACCESSORS = frozenset({"stub", "channel", "future"})
PUBLIC_CLIENT_MODULES = ("admin.py", "admin_groups.py", "admin_transactions.py", "lowlevel.py", "producer/producer.py",
                         "consumer/consumer.py")


def imported_names(tree: ast.AST) -> set[str]:
    """Every module imported, and every `module.name` taken from one."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            names.add(module)
            names.update(f"{module}.{alias.name}".lstrip(".") for alias in node.names)
    return names - {""}


def is_grpc(module: str) -> bool:
    return module.split(".")[0] in ("grpc", "grpc_health") or module.endswith("_pb2_grpc")


def client_modules() -> list[Path]:
    """The clients' modules and the gateway's, which reaches brokers and coordinators as a client."""
    files = sorted(CLIENTS_DIR.rglob("*.py"))
    assert len(files) > 40
    return files + sorted(GATEWAY_DIR.rglob("*.py"))


def test_only_the_transport_imports_grpc_or_stub_modules():
    for path in client_modules():
        grpc_imports = {m for m in imported_names(ast.parse(path.read_text(encoding="utf-8"))) if is_grpc(m)}
        if path == GRPC_OWNER:
            assert grpc_imports, "the transport's channels module is where grpc is imported"
        else:
            assert not grpc_imports, f"{path.relative_to(SERVICES_DIR)} imports {sorted(grpc_imports)}"


def test_no_client_module_calls_a_stub_or_channel_itself():
    for path in client_modules():
        if path.is_relative_to(TRANSPORT_DIR):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                assert node.func.attr not in RAW_ACCESSORS, (
                    f"{path.relative_to(SERVICES_DIR)}:{node.lineno} calls .{node.func.attr}() outside the transport")
            if isinstance(node, ast.Name | ast.Attribute):
                name = node.id if isinstance(node, ast.Name) else node.attr
                assert not name.endswith("Stub"), f"{path.relative_to(SERVICES_DIR)}:{node.lineno} names {name}"


def is_protobuf(module: str) -> bool:
    return module.startswith("services.common.pb") or module.rsplit(".", 1)[-1].endswith("_pb2")


def test_public_client_classes_build_no_protobuf_messages():
    for name in PUBLIC_CLIENT_MODULES:
        path = CLIENTS_DIR / name
        modules = imported_names(ast.parse(path.read_text(encoding="utf-8")))
        assert not {m for m in modules if is_protobuf(m)}, f"{name} imports {sorted(filter(is_protobuf, modules))}"


def test_the_protobuf_check_sees_every_way_of_importing_a_pb2_module():
    for source in ("from services.common.pb.odradek.broker.v1 import broker_pb2",
                   "from services.common.pb.odradek.controller.v1 import controller_pb2 as pb",
                   "import services.common.pb.odradek.common.v1.common_pb2",
                   "from grpc_health.v1 import health_pb2"):
        assert any(is_protobuf(m) for m in imported_names(ast.parse(source))), source
    assert not any(is_protobuf(m) for m in imported_names(ast.parse("from services.clients import admin_requests")))
