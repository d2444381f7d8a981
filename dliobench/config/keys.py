"""Declaring one configuration key: ``key()`` puts a key's parsing rules (kind, bounds,
choices, aliases, help) in its dataclass field's metadata, so a key is declared once, in its
section; the value sets several sections choose from; the text a secret is shown as.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

REDACTED = "<redacted>"  # what a secret key's value is shown and written as
SHUFFLE_MODES = ("off", "seed", "random")
# dataset.compression: hdf5 takes gzip and lzf, parquet its own codecs (each format checks)
COMPRESSIONS = ("none", "gzip", "lzf", "snappy", "lz4", "zstd", "brotli")
DATATYPES = ("int8", "uint8", "fp16", "bf16", "fp32", "fp64")  # DLIO's get_datatype_size
PARQUET_DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64")


def key(
    default: Any,
    kind: str,
    help: str,
    *,
    aliases: tuple[str, ...] = (),
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    words: tuple[tuple[Any, Any], ...] = (),
    nonempty: bool = False,
    secret: bool = False,
) -> Any:
    """Declare one configuration key (a dataclass field carrying its parsing rules).

    ``kind``: int, size, float, seconds, bool, choice, shuffle, str, ``path`` (a file-system
    path) or ``name`` (part of a file name: no '/'). Integers and sizes are bounded to
    int64 unless ``maximum`` says less. ``words``: (raw value, value) pairs taken before the
    kind's conversion, e.g. the word ``model`` for a size, or YAML's ``false`` read from a bare
    ``off``. ``nonempty``: the empty string is refused (a folder that would be the current
    directory).
    ``secret``: a credential, never shown (results, show-config, messages: ``config.secrets``).
    """
    meta = {
        "kind": kind,
        "help": help,
        "aliases": aliases,
        "minimum": minimum,
        "maximum": maximum,
        "choices": choices,
        "words": words,
        "nonempty": nonempty,
        "secret": secret,
    }
    return field(default=default, metadata=meta)
