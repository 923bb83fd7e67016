"""state.db: schema, the DbWriter actor, generations, the read pool and queries."""
