"""The names the registries own, as a leaf every layer may read.

The configuration's choices (``dataset.format``, ``reader.data_loader``) must list the formats
and loaders, but importing the registries themselves pulls in storage, numpy and the C
extension. So the names live here, with nothing imported; ``dliobench.formats`` and
``dliobench.loaders`` check at import that their ``REGISTRY`` keys equal these tuples, so a new
format is still one module, one registry line and one name here, and a mismatch fails at once.
"""

from __future__ import annotations

FORMAT_NAMES: tuple[str, ...] = (
    "npz", "npy", "hdf5", "tfrecord", "jpeg", "png", "indexed_binary", "parquet",
)
LOADER_NAMES: tuple[str, ...] = ("native", "pytorch", "dali", "tensorflow")
# reader.decoder: pil first, the default (DLIO's image reader; formats/_decoders.py)
DECODER_NAMES: tuple[str, ...] = ("pil", "simplejpeg", "turbojpeg", "dali")


def check_registry(kind: str, names: tuple[str, ...], registry: dict[str, str]) -> None:
    """Fail at import when a registry's keys and its names table disagree (order included:
    the order is the one ``dliobench keys`` and error messages show)."""
    if tuple(registry) != names:
        raise RuntimeError(f"the {kind} registry {tuple(registry)} differs from "
                           f"dliobench.config.names {names}; edit both together")
