"""Generated stubs for the `odradek.common` protobuf package."""
