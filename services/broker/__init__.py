"""The broker service: LogManager (storage) and ReplicaManager (leaders, followers, ISR, acks)."""
