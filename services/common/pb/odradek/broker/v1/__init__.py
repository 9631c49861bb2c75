"""Generated stubs for the `odradek.broker.v1` protobuf package."""
