"""Generated stubs for the `odradek.coordinator` protobuf package."""
