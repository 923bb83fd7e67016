"""The serve tree: inbound routing, session keys, session actors, drain."""
