"""One dliobench command from two or more source trees, alternating (before/after)."""
