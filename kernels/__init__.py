"""View attention kernels: a torch reference and a Triton kernel. Knows nothing of agent_runtime."""
