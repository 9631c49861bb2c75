"""Generated stubs for the `odradek.broker` protobuf package."""
