"""Fault runs with Jepsen-style verdicts on real clusters."""
