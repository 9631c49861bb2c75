"""Fault runs on a development cluster, Jepsen-style: a workload of producers and consumers
(`workload`) recording every operation in a `history`, faults from a seeded `nemesis` schedule
(`process_faults`: kills and pauses of the brokers alone), and the verdicts of a `checker` on the
history, the full read after the faults healed and the brokers' leadership lines."""
