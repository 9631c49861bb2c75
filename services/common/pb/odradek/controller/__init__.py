"""Generated stubs for the `odradek.controller` protobuf package."""
