"""ViZDoom environments for the runtime. Knows nothing of agent_runtime."""
