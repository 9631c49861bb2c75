"""The controller service: topics, replica assignment, partition and replica state machines, elections."""
