"""Code every Odradek service and client shares: records, errors, hashing, config, clock, logging."""
