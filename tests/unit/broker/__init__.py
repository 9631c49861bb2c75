"""Unit tests of the broker's pure core."""
