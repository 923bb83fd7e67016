"""Skills: folders of instructions the agent opens when a task needs them."""
