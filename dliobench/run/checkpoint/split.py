"""The split form of the checkpoint benchmark: a write-only invocation, a cache clear, then a
read-only invocation (Rules.md §4.7.1; mlpstorage's ``checkpointing run
--num-checkpoints-read 0 --num-checkpoints-write N`` then ``--num-checkpoints-write 0
--num-checkpoints-read N``).

- A write-only invocation keeps what it wrote: it exists to be read. ``checkpoint.keep=false``
  given on its command line asks for the clean-up at its end instead.
- A read-only invocation whose checkpoints are not all there is refused in one sentence
  before any rank starts (``missing``), rather than every rank dying on the first absent file.
- A read-only invocation removes the checkpoints once read (``checkpoint.keep=true`` keeps
  them); either invocation says in one sentence what happens to them (``settle``).
"""

from __future__ import annotations

from dataclasses import replace

from dliobench.config.schema import Config
from dliobench.run.checkpoint.layout import layout_for
from dliobench.storage import backend_for
from dliobench.storage.backend import Backend


def phase(config: Config) -> str:
    """``write+read``, ``write`` (write-only), ``read`` (read-only) or ``none``."""
    cfg = config.checkpoint
    writes, reads = cfg.num_checkpoints_write > 0, cfg.num_checkpoints_read > 0
    return {(True, True): "write+read", (True, False): "write",
            (False, True): "read"}.get((writes, reads), "none")


def _where(config: Config) -> str:
    folder = config.checkpoint.checkpoint_folder.rstrip("/")
    return f"{folder}/{config.name}"


def settle(config: Config) -> tuple[Config, str | None]:
    """The configuration a checkpoint-only invocation runs with (a write-only one keeps its
    checkpoints unless the command line set ``checkpoint.keep``), and the sentence saying
    what becomes of the checkpoints (None for a combined write and read run)."""
    cfg, step = config.checkpoint, phase(config)
    if step == "write":
        if "checkpoint.keep" in config.given and not cfg.keep:
            return config, (f"write-only: the {cfg.num_checkpoints_write} checkpoint(s) in "
                            f"{_where(config)} are removed at the end, as "
                            "checkpoint.keep=false asks")
        if not cfg.keep:
            config = replace(config, checkpoint=replace(cfg, keep=True))
        return config, (f"write-only: the {cfg.num_checkpoints_write} checkpoint(s) stay in "
                        f"{_where(config)} for the read-only invocation "
                        "(--num-checkpoints-write 0 --num-checkpoints-read N), which removes "
                        "them once read; give checkpoint.keep=false to remove them at the end "
                        "of this run instead")
    if step == "read":
        fate = ("stay there (checkpoint.keep=true)" if cfg.keep else
                "are removed once read (checkpoint.keep=true keeps them)")
        return config, f"read-only: the checkpoints in {_where(config)} {fate}"
    return config, None


def expected_keys(config: Config, launched: int) -> list[list[str]]:
    """The keys a read-only invocation of ``launched`` ranks reads, per checkpoint read
    (checkpoint ``i`` of ``num_checkpoints_read``, as ``run.run_checkpoints`` reads them): every
    file of every layout rank that runs (the first ``launched`` in subset mode)."""
    layout = layout_for(config, launched)
    ranks = range(min(launched, layout.world)) if config.checkpoint.mode == "subset" \
        else range(layout.world)
    names = [f.name for r in ranks for f in layout.rank_files(r)]
    return [[f"{config.name}/checkpoint-{i:04d}/{n}" for n in names]
            for i in range(max(0, config.checkpoint.num_checkpoints_read))]


def missing(config: Config, launched: int, backend: Backend | None = None) -> str | None:
    """One sentence when a read-only invocation's checkpoints are not all there (what is
    missing and what to run first), else None; any other invocation: None. Every rank
    reaches the same answer (the same keys, the same storage), so it can refuse on each."""
    if phase(config) != "read":
        return None
    store = backend or backend_for(config.checkpoint.checkpoint_folder, config.storage,
                                   "checkpoint.checkpoint_folder")
    per_checkpoint = expected_keys(config, launched)
    for index, keys in enumerate(per_checkpoint):
        absent = [k for k in keys if store.stat(k) is None]
        if absent:
            reads = config.checkpoint.num_checkpoints_read
            instead = f", or read the {index} there (--num-checkpoints-read {index})" \
                if index else ""
            return (f"the read-only checkpoint run reads {reads} checkpoint(s) from "
                    f"{_where(config)} but checkpoint {index} lacks {len(absent)} of its "
                    f"{len(keys)} files ({store.describe(absent[0])} first): write them first "
                    f"with a write-only invocation (--num-checkpoints-write {reads} "
                    "--num-checkpoints-read 0, the same --model, --num-processes and "
                    f"--checkpoint-folder){instead}")
    return None


def refuse_missing(workload: list[str], launched: int) -> None:
    """``missing`` for a command line's workload items (the workload, then overrides), as the
    front door checks it before it starts any rank: a ConfigError with the sentence."""
    from dliobench.base.errors import ConfigError
    from dliobench.config import load
    from dliobench.config.hydra import split as command_line

    line = command_line(workload, "default")
    config, _ = load.load(line.path, line.overrides)
    sentence = missing(config, launched)
    if sentence:
        raise ConfigError(sentence)
