"""The agent's tools, one module each."""
