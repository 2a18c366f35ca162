"""The model: loading, the CPU path, linear kernels and LoRA adapters."""
