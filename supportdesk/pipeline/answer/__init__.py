"""The answer stage's parts: the knowledge-base tool adapter, the agent loop, the final answer."""
