"""Tools from MCP servers: each server an actor under its own supervisor."""
