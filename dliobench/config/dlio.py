"""DLIO keys dliobench knows about but does not implement (yet), and DLIO's value aliases.

A workload file written for DLIO 2.0.0 or DLIO's main branch that sets one of these runs here
with one warning naming them, instead of failing as an unknown key. Entries are dotted
prefixes: ``dataset.hdf5`` covers ``dataset.hdf5.chunk_dims`` and the rest of that mapping.
"""

from __future__ import annotations

# reader.data_loader values of DLIO that map onto one of our loaders.
LOADER_ALIASES = {"native_dali": "dali"}

# Section names DLIO accepts as synonyms of ours.
SECTION_ALIASES = {"data_reader": "reader"}

UNSUPPORTED_DLIO_KEYS = frozenset({
    # whole sections
    "profiling", "evaluation", "storage.storage_options",
    "checkpoint.checkpoint_mechanism_classname",
    "checkpoint.recovery_rank_shift", "checkpoint.rank_sync",
    "checkpoint.randomize_tensor", "checkpoint.ksm", "checkpoint.optimization_groups",
    "checkpoint.num_layers", "checkpoint.layer_parameters", "checkpoint.tensor_parallelism",
    "checkpoint.pipeline_parallelism",
    "workflow.evaluation", "workflow.profiling", "workflow.debug",
    "workflow.query",
    "dataset.num_files_eval", "dataset.num_subfolders_eval", "dataset.keep_files",
    "dataset.generation_buffer_size", "dataset.record_dims",
    "dataset.record_element_type", "dataset.record_element_bytes", "dataset.hdf5",
    "dataset.data_gen_method",
    "reader.batch_size_eval", "reader.computation_threads", "reader.read_type",
    "reader.transfer_size", "reader.preprocess_time", "reader.preprocess_time_stdev",
    "reader.shuffle_size", "reader.dont_use_mmap", "reader.reader_classname",
    "reader.data_loader_classname", "reader.data_loader_sampler",
    "reader.transformed_record_dims", "reader.transformed_record_element_type",
    "model.optimization_groups", "model.layer_parameters",
    "output.log_file",
})


def is_unsupported(name: str) -> bool:
    """True when ``name`` or one of its dotted prefixes is a DLIO key we do not implement."""
    parts = name.split(".")
    return any(".".join(parts[:n]) in UNSUPPORTED_DLIO_KEYS for n in range(1, len(parts) + 1))
