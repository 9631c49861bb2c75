"""Odradek's Spark jobs."""
