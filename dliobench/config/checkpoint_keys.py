"""The ``model`` and ``checkpoint`` sections: the emulated model (its name, and the sizes a
checkpoint of it holds) and when and how checkpoints are written and read."""

from __future__ import annotations

from dataclasses import dataclass

from dliobench.config.keys import DATATYPES, key


@dataclass(frozen=True)
class ModelConfig:
    """The model being emulated."""

    name: str = key("", "str", "workload name (default: the workload file's name)")
    model_size_bytes: int = key(
        0, "size", "model size in bytes", aliases=("checkpoint.model_size",), minimum=0
    )
    type: str = key("", "str", "model kind; 'transformer' sizes checkpoints from the keys "
                    "below (DLIO main's model.type)")
    num_layers: int = key(0, "int", "transformer layers (0: not a transformer layout)",
                          minimum=0)
    model_datatype: str = key("fp16", "choice", "datatype of the model's weights",
                              choices=DATATYPES)
    optimizer_datatype: str = key("fp32", "choice", "datatype of the optimizer state",
                                  choices=DATATYPES)
    vocab_size: int = key(0, "int", "vocabulary size", minimum=0,
                          aliases=("model.transformer.vocab_size",))
    hidden_size: int = key(0, "int", "hidden dimension", minimum=0,
                           aliases=("model.transformer.hidden_size",))
    ffn_hidden_size: int = key(0, "int", "feed-forward (MLP) dimension", minimum=0,
                               aliases=("model.transformer.ffn_hidden_size",))
    num_attention_heads: int = key(1, "int", "attention heads", minimum=1,
                                   aliases=("model.transformer.num_attention_heads",))
    num_kv_heads: int = key(1, "int", "key/value heads (grouped-query attention)", minimum=1,
                            aliases=("model.transformer.num_kv_heads",))
    tensor_parallelism: int = key(1, "int", "tensor-parallel degree (TP)", minimum=1,
                                  aliases=("model.parallelism.tensor",))
    pipeline_parallelism: int = key(1, "int", "pipeline-parallel degree (PP)", minimum=1,
                                    aliases=("model.parallelism.pipeline",))
    data_parallelism: int = key(
        -1, "int", "data-parallel degree (DP) of the checkpoint layout (-1: launched ranks / "
        "(TP x PP)); more than that spreads the layout's shards over the launched ranks",
        minimum=-1, aliases=("model.parallelism.data",))
    zero_stage: int = key(0, "int", "ZeRO stage: 0 none, 1-2 optimizer sharded over DP, "
                          "3 weights too", minimum=0, maximum=3,
                          aliases=("model.parallelism.zero_stage",))


@dataclass(frozen=True)
class CheckpointConfig:
    """When and how the emulated training writes checkpoints (``workflow.checkpoint``), or,
    with ``workflow.train: false``, how the checkpoint-only workflow writes and reads them."""

    checkpoint_folder: str = key("checkpoints", "path", "root folder of checkpoint files",
                                 nonempty=True)
    checkpoint_after_epoch: int = key(1, "int", "first epoch that ends with a checkpoint",
                                      minimum=1)
    epochs_between_checkpoints: int = key(1, "int", "epochs from one checkpoint to the next",
                                          minimum=1)
    steps_between_checkpoints: int = key(
        -1, "int", "checkpoint every N steps instead of by epochs (-1: by epochs)", minimum=-1)
    type: str = key("rank_zero", "choice", "rank 0 writes all (rank_zero) or every rank a "
                    "shard (all_ranks)", choices=("rank_zero", "all_ranks"))
    fsync: bool = key(True, "bool", "fsync checkpoint files, so the time includes storage")
    read_after_write: bool = key(False, "bool", "read each checkpoint back after evicting it")
    keep: bool = key(False, "bool", "keep the checkpoint files after the run (by default "
                     "they are deleted once measured; a write-only checkpoint run keeps them "
                     "for the read-only run unless this is set false)")
    optimizer_state_factor: float = key(
        0.0, "float", "optimizer state as a multiple of the model size (Adam in fp32: 2)",
        minimum=0, maximum=1000)
    num_checkpoints_write: int = key(
        10, "int", "checkpoint-only workflow (workflow.train: false): checkpoints written, "
        "one after another (-1 or 0: none, only read what an earlier run wrote)", minimum=-1)
    num_checkpoints_read: int = key(
        10, "int", "checkpoint-only workflow: checkpoints read after the writes (-1 or 0: none)",
        minimum=-1)
    time_between_checkpoints: float = key(
        0.0, "seconds", "checkpoint-only workflow: pause between two checkpoints (DLIO's "
        "stand-in for training steps)", minimum=0)
    mode: str = key(
        "default", "choice", "checkpoint-only workflow: every rank of the layout writes its "
        "shard (default), or the launched ranks write only their share of it, the MLPerf "
        "Storage rules' node-local mode: num_gpus / (TP x PP x DP) of the checkpoint (subset)",
        choices=("default", "subset"))
    scale: float = key(
        1.0, "float", "checkpoint-only workflow: write this fraction of every tensor's "
        "elements (the layout, files and tensors stay; the result states the scale)",
        minimum=0, maximum=1)
    file_format: str = key(
        "auto", "choice", "checkpoint-only workflow: torch.save files (torch), raw bytes "
        "(raw), or torch when it is installed (auto)", choices=("auto", "torch", "raw"))
    evict_before_read: bool = key(
        True, "bool", "checkpoint-only workflow: drop the written checkpoints from the page "
        "cache before reading them, so reads reach the storage")
