"""The `hermes` command."""
