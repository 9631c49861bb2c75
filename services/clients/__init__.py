"""Python clients of Odradek: Producer, Consumer, Admin and the `odradek` command line."""
