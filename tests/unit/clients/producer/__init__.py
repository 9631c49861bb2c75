"""Unit tests of the producer: partitioners, accumulator, config, and the sender against a fake broker."""
