"""Generated stubs for the `odradek` protobuf packages."""
