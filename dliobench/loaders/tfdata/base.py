"""TensorFlow for the tf.data loader: imported quietly, once, only when that loader is chosen.

TensorFlow's C++ side prints start-up lines on import (oneDNN's notice, CPU-feature hints) and
TF's Python side AutoGraph warnings; neither concerns a benchmark's user, so both are silenced
unless the user set the variables. oneDNN only changes floating-point kernels, which this
pipeline never runs (it moves bytes).
"""

from __future__ import annotations

import gc
import logging
import os
import re
from typing import Any

from dliobench.base.errors import DatasetError, MissingExtraError

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # C++ INFO and WARNING lines
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # its notice is printed before absl's level
# TensorFlow's CPU tensors come from malloc by default; a batch of large samples (8 x 16 MiB)
# is above glibc's mmap threshold, so every batch was fresh memory: its page faults and the
# kernel's zeroing on each. TensorFlow's BFC allocator keeps and reuses what it allocated
# (grows as needed, up to TF_CPU_BFC_MEM_LIMIT_IN_MB, 64 GiB by default): TFRecord 16 MiB,
# 9,469 -> 5,078 minor faults and 36.8 -> 25.3 ms CPU per sample here.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

try:
    import tensorflow as _tf
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("TensorFlow", "tensorflow") from exc

# TensorFlow's import leaves ~350,000 objects the cyclic GC tracks; each full collection
# walked them all (0.16 s here) and took ~10 % of a tf.data run's CPU. Frozen, they are
# skipped: they live as long as the process anyway.
gc.freeze()
_tf.get_logger().setLevel(logging.ERROR)
tf: Any = _tf  # used untyped: TensorFlow ships no usable stubs
no_autograph = tf.autograph.experimental.do_not_convert  # plain tf.function tracing


def options(threads: int) -> Any:
    """tf.data options: deterministic order, and a private pool of ``threads`` threads (as
    DLIO's tf.data loader sizes it) so the pipeline uses what ``reader.read_threads`` says."""
    opts = tf.data.Options()
    opts.deterministic = True
    opts.threading.private_threadpool_size = max(1, threads)
    opts.threading.max_intra_op_parallelism = 1
    return opts


def read_error(exc: Exception) -> DatasetError:
    """A tf.data read failure (a damaged or missing TFRecord file) as one sentence."""
    message = str(getattr(exc, "message", exc)).strip().splitlines()[0]
    message = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:.*$", "", message).rstrip(".")  # TF's op names
    return DatasetError(f"tf.data could not read the dataset: {message}; check the file "
                        "system, or regenerate the dataset with `dliobench generate`")
