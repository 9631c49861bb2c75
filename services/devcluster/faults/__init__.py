"""Fault runs on a development cluster, Jepsen-style: a workload of producers and consumers
(`workload`) recording every operation in a `history`, faults driven from a seeded schedule
(`process_faults` for process faults on loopback), and the verdicts of a `checker` on the history,
the full read after the faults healed and the brokers' leadership lines."""
