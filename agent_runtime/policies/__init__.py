"""Players that are not the engine: scripted baselines, the lag-aware experts, the sequential agent."""
