"""The report's figures (matplotlib, Agg), a module each: ``scaling``, ``comparison``,
``waits`` (the wait CDF), ``timeline`` (per-rank steps), ``checkpoints`` (GB/s per
repetition), ``projection`` (``predict --from``), ``kvcache`` (KV-cache runs' latency CDF per tier,
users vs P95, tokens/s over time), ``vectordb`` (query latency CDF, recall against QPS);
``figure`` holds what they share
(``Plot``, saving, wrapping, AU floors).

Each figure function returns a ``Plot``: the PNG it wrote, or no file and the reason it was
not drawn, so the HTML can say why a figure is absent.
"""

import matplotlib

matplotlib.use("Agg")  # before any figure module imports matplotlib's figures
