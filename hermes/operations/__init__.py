"""One function per operator action, shared by the CLI, the dashboard and JSON-RPC."""
