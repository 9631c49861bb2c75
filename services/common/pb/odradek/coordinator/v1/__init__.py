"""Generated stubs for the `odradek.coordinator.v1` protobuf package."""
