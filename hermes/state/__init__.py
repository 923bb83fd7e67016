"""state.db: schema, the DbWriter actor, the registry, the Db handle, reads and queries."""
