"""The web as the agent reaches it: which addresses it may connect to, and pages as text."""
