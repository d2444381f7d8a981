"""The training loop's own cost: per-step overhead, accelerator emulation."""
