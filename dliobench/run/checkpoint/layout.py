"""Which files each rank of a sharded LLM checkpoint writes, with which tensors.

The arithmetic follows DLIO main's ``dlio_benchmark/checkpointing/base_checkpointing.py``
(argonne-lcf/dlio_benchmark@e1919d7b6ccffbe15143cd616517da9e5d7b26a7): a Llama-style
transformer's parameters per layer (embedding, attention with grouped KV heads, gated MLP,
norms, lm_head), the layers split over pipeline stages (embedding on the first, lm_head and the
final norm on the last), tensors split over tensor-parallel ranks, ZeRO 3 splitting the weights
over data-parallel ranks too, ZeRO 1-2 leaving the weights to data-parallel rank 0, and the
optimizer state (three fp32 copies of the rank's parameters plus small groups) split over all
ranks. File names follow DeepSpeed's, as DLIO writes them. Rank ``r`` is tensor rank
``r % TP``, pipeline stage ``(r // TP) % PP``, data-parallel rank ``r // (TP x PP)``.

Upstream's numbers, summed over ranks, are what the MLPerf Storage rules' Table 2 lists in
"GB" meaning GiB (2^30 B) and "TB" meaning 1,000 GiB; ``tests/unit/test_ckpt_layout.py``
checks all four presets.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from dliobench.config.schema import Config

DTYPE_BYTES = {"int8": 1, "uint8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}


@dataclass(frozen=True)
class Tensor:
    """One tensor of a checkpoint file: a name, its element count and datatype."""

    name: str
    numel: int
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's data."""
        return self.numel * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class ShardFile:
    """One file a rank writes: its name inside a checkpoint's folder and its tensors."""

    name: str
    kind: str  # "model" or "optimizer"
    tensors: tuple[Tensor, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of tensor data in the file."""
        return sum(t.nbytes for t in self.tensors)


@dataclass(frozen=True)
class Transformer:
    """The shape of a Llama-style transformer (DLIO main's ``model.transformer`` keys)."""

    num_layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int

    @property
    def kv_dim(self) -> int:
        """Columns of the K and V projections (head size x KV heads)."""
        return self.hidden // self.heads * self.kv_heads

    def num_parameters(self) -> int:
        """Parameters of the whole model, as upstream counts them."""
        h = self.hidden
        block = h + h * (h + 2 * self.kv_dim) + h * h + h + 3 * self.ffn * h
        return 2 * self.vocab * h + block * self.num_layers + h

    def layer(self, index: int, tp: int, shard: int) -> list[tuple[str, int]]:
        """(name, elements) of layer ``index`` on one tensor rank, split ``shard`` ways more
        (ZeRO 3). Layer 0 is the embedding, 1..L the blocks, L+1 lm_head, L+2 the final norm."""
        h, last = self.hidden, self.num_layers
        if index in (0, last + 1):
            name = "embedding" if index == 0 else "lm_head"
            return [(name, h * self.vocab // tp // shard)]
        if index == last + 2:
            return [("final_norm", h // shard)]
        return [("input_norm", h // shard),
                ("attention_qkv", h * (h + 2 * self.kv_dim) // tp // shard),
                ("attention_dense", h * h // tp // shard),
                ("post_attention_norm", h // shard),
                ("mlp_h_to_4h", h * 2 * self.ffn // tp // shard),
                ("mlp_4h_to_h", h * self.ffn // tp // shard)]


@dataclass(frozen=True)
class Layout:
    """A checkpoint's layout over TP x PP x DP ranks with a ZeRO stage, scaled by ``scale``."""

    model: Transformer
    tp: int
    pp: int
    dp: int
    zero: int
    model_dtype: str = "fp16"
    optimizer_dtype: str = "fp32"
    scale: float = 1.0

    @property
    def world(self) -> int:
        """Ranks of the layout (TP x PP x DP)."""
        return self.tp * self.pp * self.dp

    @property
    def mp(self) -> int:
        """Model-parallel ranks (TP x PP)."""
        return self.tp * self.pp

    def stage_layers(self, stage: int) -> range:
        """Layer indices of pipeline stage ``stage`` (blocks split as evenly as upstream
        splits them, the first ``L % PP`` stages one more)."""
        per, extra = divmod(self.model.num_layers, self.pp)
        start = stage * per + min(stage, extra) + 1
        end = start + per - (stage >= extra)
        if stage == self.pp - 1:
            end = self.model.num_layers + 2
        return range(0 if stage == 0 else start, end + 1)

    def _scaled(self, numel: int) -> int:
        return numel if self.scale == 1.0 else max(1, round(numel * self.scale))

    def _writes_model(self, rank: int) -> bool:
        dp_rank = rank // self.mp
        if self.zero == 0:
            return rank < self.mp
        return self.zero == 3 or dp_rank == 0

    def _model_files(self, rank: int) -> list[ShardFile]:
        if not self._writes_model(rank):
            return []
        mp_rank, dp_rank = rank % self.mp, rank // self.mp
        stage = (rank // self.tp) % self.pp
        shard = self.dp if self.zero == 3 else 1

        def tensors(layers: range) -> tuple[Tensor, ...]:
            return tuple(Tensor(f"layer_{i}.{name}", self._scaled(n), self.model_dtype)
                         for i in layers for name, n in self.model.layer(i, self.tp, shard)
                         if n > 0)

        layers = self.stage_layers(stage)
        if self.zero in (1, 2) and self.pp > 1:  # layer by layer, as upstream does then
            return [ShardFile(f"layer_{i}-model_{mp_rank}_model_states.pt", "model",
                              tensors(range(i, i + 1))) for i in layers]
        if self.zero in (1, 2):
            return [ShardFile(f"model_{mp_rank}_model_states.pt", "model", tensors(layers))]
        return [ShardFile(f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_model_states.pt",
                          "model", tensors(layers))]

    @cached_property
    def _optimizer_numel(self) -> list[int]:
        ways = self.dp * self.mp if self.zero > 0 else self.mp
        params = self.model.num_parameters() // ways
        small = self.model.hidden * 5
        return [params, small] * 3 if params > 0 else []

    def _optimizer_file(self, rank: int) -> list[ShardFile]:
        if self.zero == 0 and rank >= self.mp:
            return []
        mp_rank, dp_rank = rank % self.mp, rank // self.mp
        tensors = tuple(Tensor(f"group_{i}", self._scaled(n), self.optimizer_dtype)
                        for i, n in enumerate(self._optimizer_numel))
        return [ShardFile(f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_optim_states.pt",
                          "optimizer", tensors)] if tensors else []

    def rank_files(self, rank: int) -> list[ShardFile]:
        """The files layout rank ``rank`` writes in one checkpoint."""
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} is outside the layout's {self.world} ranks")
        return self._model_files(rank) + self._optimizer_file(rank)

    def rank_bytes(self, rank: int) -> tuple[int, int]:
        """(model bytes, optimizer bytes) layout rank ``rank`` writes in one checkpoint."""
        files = self.rank_files(rank)
        return (sum(f.nbytes for f in files if f.kind == "model"),
                sum(f.nbytes for f in files if f.kind == "optimizer"))

    def totals(self, ranks: range | None = None) -> tuple[int, int]:
        """(model bytes, optimizer bytes) of one checkpoint summed over ``ranks`` (all)."""
        model = optimizer = 0
        for rank in ranks if ranks is not None else range(self.world):
            m, o = self.rank_bytes(rank)
            model, optimizer = model + m, optimizer + o
        return model, optimizer


def is_transformer(config: Config) -> bool:
    """Whether the configuration describes a transformer layout (model.num_layers > 0)."""
    return config.model.num_layers > 0


def layout_for(config: Config, launched: int) -> Layout:
    """The checkpoint layout a configuration asks for, with ``launched`` ranks running.

    DP is ``model.data_parallelism`` when given, else the launched ranks over TP x PP.
    """
    m = config.model
    dp = m.data_parallelism if m.data_parallelism > 0 else max(
        1, launched // (m.tensor_parallelism * m.pipeline_parallelism))
    shape = Transformer(m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads,
                        m.num_kv_heads, m.vocab_size)
    return Layout(shape, m.tensor_parallelism, m.pipeline_parallelism, dp, m.zero_stage,
                  m.model_datatype, m.optimizer_datatype, config.checkpoint.scale)


def describe(layout: Layout, scale_note: bool = True) -> list[str]:
    """Lines describing the layout: totals, then ranks grouped by what they write (a
    1,024-rank layout has a handful of kinds of rank)."""
    model, optimizer = layout.totals()
    total = model + optimizer
    lines = [f"checkpoint layout: TP {layout.tp} x PP {layout.pp} x DP {layout.dp} = "
             f"{layout.world} ranks, ZeRO {layout.zero}, "
             f"{layout.model.num_parameters():,} parameters",
             f"per checkpoint: model {model:,} B + optimizer {optimizer:,} B = {total:,} B "
             f"({total / 1e9:,.2f} GB, {total / 2**30:,.1f} GiB)"]
    if scale_note and layout.scale != 1.0:
        lines.append(f"scaled by checkpoint.scale={layout.scale:g} (every tensor's elements)")
    groups: dict[tuple[int, int, int], list[int]] = {}
    for rank in range(layout.world):
        files = layout.rank_files(rank)
        m = sum(f.nbytes for f in files if f.kind == "model")
        groups.setdefault((m, sum(f.nbytes for f in files) - m, len(files)), []).append(rank)
    for (m, o, n), ranks in sorted(groups.items(), key=lambda kv: kv[1][0]):
        lines.append(f"  {len(ranks)} rank(s) like rank {ranks[0]}: {n} files, model {m:,} B, "
                     f"optimizer {o:,} B")
    for shard in layout.rank_files(0):
        lines.append(f"  rank 0 {shard.name}: {len(shard.tensors)} tensors, {shard.nbytes:,} B")
    return lines
