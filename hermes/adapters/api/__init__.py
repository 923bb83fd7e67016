"""An OpenAI-compatible API: chat completions over HTTP for clients that speak it."""
