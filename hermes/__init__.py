"""hermes: the runtime of a long-lived personal AI-agent gateway."""
