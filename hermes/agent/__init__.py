"""The agent: model providers, the tool-call loop, tools and memory."""
