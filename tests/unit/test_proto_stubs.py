"""The committed stubs in `services/common/pb/` match the .proto files under `proto/`.

Generated text differs between grpcio-tools versions, so the check compares descriptors: each
.proto is compiled to a FileDescriptorProto and compared with the one embedded in the committed
`_pb2` module. protoc fills in `json_name` only in descriptor sets, never in the embedded copy, so
it is cleared on both sides. Run `make proto` to fix a failure here.
"""

from __future__ import annotations

import difflib
import importlib
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, text_format

from services.common import protogen

PROTO_ROOT = protogen.PROTO_ROOT
PB_ROOT = protogen.DEFAULT_OUT
PROTO_NAMES = [str(p.relative_to(PROTO_ROOT)) for p in protogen.proto_files()]
FIX = "stubs are out of date with proto/: run `make proto`"


def _module_name(proto_name: str, suffix: str) -> str:
    stem = proto_name.removesuffix(".proto").replace("/", ".")
    return f"{protogen.IMPORT_PREFIX}.{stem}{suffix}"


def _committed_path(proto_name: str, suffix: str) -> Path:
    return PB_ROOT / f"{proto_name.removesuffix('.proto')}{suffix}.py"


@pytest.fixture(scope="session")
def compiled(tmp_path_factory) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Every .proto compiled by protoc, by file name (e.g. `odradek/broker/v1/broker.proto`)."""
    out = tmp_path_factory.mktemp("descriptors") / "odradek.desc"
    includes = [f"-I{d}" for d in protogen.protoc_include_dirs()]
    protogen.run_protoc([*includes, f"--descriptor_set_out={out}", *PROTO_NAMES])
    descriptor_set = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return {f.name: f for f in descriptor_set.file}


def _clear_json_names(messages) -> None:
    for message in messages:
        for field in [*message.field, *message.extension]:
            field.ClearField("json_name")
        _clear_json_names(message.nested_type)


def _normalised(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(file)
    for field in copy.extension:
        field.ClearField("json_name")
    _clear_json_names(copy.message_type)
    return copy


def _diff(expected: descriptor_pb2.FileDescriptorProto, actual: descriptor_pb2.FileDescriptorProto) -> str:
    lines = difflib.unified_diff(
        text_format.MessageToString(actual).splitlines(),
        text_format.MessageToString(expected).splitlines(),
        "committed stub",
        ".proto",
        lineterm="",
        n=2,
    )
    return "\n".join(list(lines)[:60])


def test_proto_files_exist():
    assert PROTO_NAMES, f"no .proto files under {PROTO_ROOT}"


@pytest.mark.parametrize("proto_name", PROTO_NAMES)
def test_each_proto_has_committed_modules(proto_name):
    for suffix in ("_pb2", "_pb2_grpc"):
        assert _committed_path(proto_name, suffix).is_file(), f"{proto_name}: no {suffix} module; {FIX}"
    assert _committed_path(proto_name, "_pb2").with_suffix(".pyi").is_file(), f"{proto_name}: no .pyi; {FIX}"


def test_no_stubs_without_proto():
    expected = {_committed_path(name, "_pb2") for name in PROTO_NAMES}
    committed = set(PB_ROOT.rglob("*_pb2.py"))
    assert committed <= expected, f"stubs without a .proto: {sorted(map(str, committed - expected))}; {FIX}"


@pytest.mark.parametrize("proto_name", PROTO_NAMES)
def test_stub_modules_import(proto_name):
    for suffix in ("_pb2", "_pb2_grpc"):
        importlib.import_module(_module_name(proto_name, suffix))


@pytest.mark.parametrize("proto_name", PROTO_NAMES)
def test_stubs_use_stable_import_path(proto_name):
    for suffix in ("_pb2", "_pb2_grpc"):
        text = _committed_path(proto_name, suffix).read_text()
        assert protogen.rewrite_imports(text) == text, f"{proto_name}{suffix}: unrewritten import; {FIX}"


@pytest.mark.parametrize("proto_name", PROTO_NAMES)
def test_descriptor_matches_proto(proto_name, compiled):
    module = importlib.import_module(_module_name(proto_name, "_pb2"))
    committed = _normalised(descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb))
    expected = _normalised(compiled[proto_name])
    assert committed == expected, f"{proto_name}: {FIX}\n{_diff(expected, committed)}"


@pytest.mark.parametrize("proto_name", PROTO_NAMES)
def test_services_have_grpc_stubs(proto_name, compiled):
    grpc_module = importlib.import_module(_module_name(proto_name, "_pb2_grpc"))
    for service in compiled[proto_name].service:
        for name in (
            f"{service.name}Stub",
            f"{service.name}Servicer",
            f"add_{service.name}Servicer_to_server",
        ):
            assert hasattr(grpc_module, name), f"{proto_name}: {name} missing; {FIX}"
        servicer = getattr(grpc_module, f"{service.name}Servicer")
        for method in service.method:
            assert hasattr(servicer, method.name), f"{service.name}.{method.name} missing; {FIX}"
