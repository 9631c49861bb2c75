"""Generated stubs for the `odradek.common.v1` protobuf package."""
