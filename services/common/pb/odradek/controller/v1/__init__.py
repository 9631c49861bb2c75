"""Generated stubs for the `odradek.controller.v1` protobuf package."""
