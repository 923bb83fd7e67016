"""The local endpoint: JSON-RPC 2.0 over WebSocket on loopback, for `hermes chat`."""
