"""The actor kernel: actors, addresses, supervisors, drain and introspection."""
