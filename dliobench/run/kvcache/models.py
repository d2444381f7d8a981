"""The model presets of the KV-cache benchmark and the bytes one token's KV entry takes.

Figures from mlcommons/storage ``kv_cache_benchmark/kv_cache/models.py``@64f05b37
(``_DEFAULT_MODEL_CONFIGS``): layers, hidden size, attention heads, KV heads, float16. KV bytes
per token = 2 (K and V) x layers x KV heads x head size x dtype bytes, head size being hidden
size / attention heads (upstream's ``kv_cache_size_per_token``).
"""

from __future__ import annotations

from dataclasses import dataclass

UPSTREAM = "mlcommons/storage kv_cache_benchmark/kv_cache/models.py@64f05b37"
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}


@dataclass(frozen=True)
class KVModel:
    """One model's attention shape, as far as its KV cache goes."""

    name: str
    num_layers: int
    hidden_dim: int
    num_heads: int
    kv_heads: int
    dtype: str = "float16"

    @property
    def head_dim(self) -> int:
        """Size of one attention head."""
        return self.hidden_dim // self.num_heads

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of K and V one token adds to the cache, over all layers."""
        return 2 * self.num_layers * self.kv_heads * self.head_dim * DTYPE_BYTES[self.dtype]


PRESETS: dict[str, KVModel] = {
    "tiny-1b": KVModel("Tiny 1B", 12, 1024, 8, 4),
    "mistral-7b": KVModel("Mistral 7B", 32, 4096, 32, 8),
    "llama2-7b": KVModel("Llama 2 7B", 32, 4096, 32, 32),
    "llama3.1-8b": KVModel("Llama 3.1 8B", 32, 4096, 32, 8),
    "llama3.1-70b-instruct": KVModel("Llama 3.1 70B Instruct", 80, 8192, 64, 8),
}
