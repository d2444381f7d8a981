"""The KV-cache benchmark against upstream's kv-cache.py."""
