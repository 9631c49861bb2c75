"""The development cluster: the launcher behind `make up`, `odradek dev` and the tests' cluster
fixture (`launcher`), the ZooKeeper runner (`zookeeper`), the process helpers (`proc`) and the
`odradek dev` command (`cli`). It starts every service as a process by module name and talks to it
through the clients; no service imports it."""
