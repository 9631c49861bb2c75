"""Replication between brokers: follower fetcher threads, the leader endpoint they call, and the
leader's ISR maintenance."""
