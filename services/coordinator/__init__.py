"""The coordinator service: consumer groups and their committed offsets, kept in `__consumer_offsets`."""
