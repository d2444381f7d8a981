"""The KV-cache benchmark (``dliobench kvcache``, ``workflow.kvcache``): LLM inference
offloading its KV cache to a waterfall of tiers, after mlcommons/storage's
``kv_cache_benchmark``; ``session.run`` is its entry point (docs/kvcache.md)."""
