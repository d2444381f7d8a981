"""The base layer: what every other layer may use (docs/ARCHITECTURE.md, "Layers").

``errors`` (the exceptions a user reads, with their exit codes), ``units`` (sizes in words),
``interrupts`` (Ctrl-C and SIGTERM taken where the run chooses) and ``leftovers`` (what a
killed run left behind). It imports nothing else of dliobench.
"""
