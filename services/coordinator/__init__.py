"""The coordinator service: consumer groups, committed offsets, producer ids and transactions."""
