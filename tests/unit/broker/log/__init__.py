"""Unit tests of the storage engine (services.broker.log)."""
