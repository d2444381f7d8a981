"""The work of the commands that run on every rank: ``run``, ``generate``, ``ceiling`` and
``metadata``, each one function from a loaded configuration to what rank 0 reports.

Each joins the job under its launcher, settles before any work what can be refused (a
refusal is the same on every rank, so rank 0 says it once: ``run.preflight``), then does
the work on every rank under ``comm.abort.on_every_rank`` (a rank that fails ends the job).
Nothing here prints: the command line hands what comes back to ``results.console``.

Which benchmark a ``run`` is (training, or the checkpoint-only workflow) is decided here
and only here, in ``run_benchmark``: both the checks before the run and the session that
does it follow from that one choice.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dliobench.base.errors import ConfigError
from dliobench.comm.abort import on_every_rank
from dliobench.comm.launch import join
from dliobench.config.schema import Config
from dliobench.run import preflight, session

if TYPE_CHECKING:
    from dliobench.comm.world import World
    from dliobench.dataset.generate import Generated
    from dliobench.results.console import Ceiling
    from dliobench.run.runset import SetAsked, SetOutcome

log = logging.getLogger("dliobench")


@dataclass(frozen=True)
class Asked:
    """What the command line asked of a command besides the configuration."""

    launcher: str  # --launcher: auto, mpi, torch or none
    yes: bool  # generate a large dataset without asking
    show_progress: bool
    say: Callable[[str], None]  # tells the user something as the work goes (rank 0 calls it)


def run_benchmark(config: Config, warnings: list[str], asked: Asked) -> session.RunOutcome:
    """``dliobench run``: check, then run the benchmark the configuration asks for on every
    rank; rank 0's outcome holds the result (others: Nones)."""
    world, comm = join(asked.launcher)
    preflight.check_outputs(config, generating=False)
    if config.workflow.kvcache:
        from dliobench.run.kvcache import session as kv_session

        return on_every_rank(world, comm, lambda: session.RunOutcome(*kv_session.run(
            config, world, comm, warnings, session.save)), config.train.stall_timeout_s)
    if config.workflow.vectordb:
        from dliobench.run.vectordb import session as vdb_session

        return on_every_rank(world, comm, lambda: session.RunOutcome(*vdb_session.run(
            config, world, comm, warnings, session.save)), config.train.stall_timeout_s)
    if config.workflow.checkpoint_only:
        from dliobench.run.checkpoint import run as ckpt_run
        from dliobench.run.checkpoint import session as ckpt_session

        config = _split_checkpoint(config, world, asked)
        ckpt_run.precheck(config, world)
        return on_every_rank(world, comm, lambda: session.RunOutcome(*ckpt_session.run(
            config, world, comm, warnings, session.save)), config.train.stall_timeout_s)
    config, warnings = _before_training(config, warnings, asked, world)
    return on_every_rank(world, comm, lambda: session.run(
        config, world, comm, warnings, show_progress=asked.show_progress),
        config.train.stall_timeout_s)


def _split_checkpoint(config: Config, world: World, asked: Asked) -> Config:
    """A write-only invocation keeps its checkpoints, a read-only one finds them or is refused
    in one sentence; rank 0 says what becomes of them (``run.checkpoint.split``)."""
    from dliobench.run.checkpoint import split

    config, said = split.settle(config)
    sentence = split.missing(config, world.size)
    if sentence:
        raise ConfigError(sentence)
    if said and world.is_root:
        asked.say(said)
    return config


def run_benchmark_set(config: Config, warnings: list[str], asked: Asked, set_asked: SetAsked,
                      on_run: Callable[[session.RunOutcome], object]) -> SetOutcome:
    """``dliobench run --repeat N`` / ``--run-set``: the runs of a set, each as ``run``
    runs it, in step on every rank (``run.runset``); rank 0 gets the set document."""
    from dliobench.run import runset

    world, _ = join(asked.launcher)
    return runset.run_set(config, set_asked, world.is_root,
                          lambda one: run_benchmark(one, warnings, asked), on_run, asked.say)


def _before_training(config: Config, warnings: list[str], asked: Asked,
                     world: World) -> tuple[Config, list[str]]:
    """The configuration fits the ranks, its reads reach storage (the configuration it reads
    with, said once), more readers than cores is said, a large generation is confirmed."""
    from dliobench.run.planning import precheck

    preflight.check_device(config)
    preflight.check_dataset_present(config)
    precheck(config, world, generating=False)
    reads = preflight.reads_from_storage(config)
    crowded = preflight.oversubscribed(config, world.local_size)
    said = [*reads.warnings, *([crowded] if crowded else [])]
    for sentence in reads.warnings:
        log.warning("%s", sentence)
    if reads.said and world.is_root:
        asked.say(reads.said)
    preflight.confirm_generation(reads.config, asked.yes, world)
    if crowded:  # after every refusal above: a refused run is one sentence
        log.warning("%s", crowded)
    return reads.config, [*warnings, *said]


def generate_dataset(config: Config, asked: Asked, verify: bool) -> Generated | None:
    """``dliobench generate``: write what is missing of the dataset, a large one only once
    confirmed; rank 0 gets the figures (others: None)."""
    from dliobench.dataset.lock import locked
    from dliobench.dataset.prepare import generate_locked
    from dliobench.results.files import write_datagen_record
    from dliobench.run.planning import precheck, resolve

    world, comm = join(asked.launcher)
    preflight.check_outputs(config, generating=True)
    precheck(config, world, generating=True)
    preflight.confirm_generation(config, asked.yes, world)

    def work() -> Generated:
        plan = resolve(config, world, comm)
        if plan.existing:
            raise ConfigError(f"the dataset in {config.dataset.data_folder} is an existing one "
                              "(indexed, not generated by dliobench): there is nothing to "
                              "generate; `dliobench run` reads it")
        with locked(plan.backend, world, exclusive=False, doing="generating",
                    wait_s=config.storage.lock_wait_s) as lock:
            return generate_locked(plan, world, comm, lock, asked.show_progress, verify)

    started = time.time()
    done = on_every_rank(world, comm, work, config.train.stall_timeout_s)
    if world.is_root and config.output.layout == "mlpstorage":
        record = write_datagen_record(config, {"ranks": world.size, "argv": sys.argv,
                                               "runtime": time.time() - started,
                                               "started": _iso(started), "finished": _iso()})
        log.info("the generation's record (mlpstorage's datagen folder): %s", record)
    return done if world.is_root else None


def _iso(seconds: float | None = None) -> str:
    """An epoch time (now by default) as an ISO 8601 UTC time with microseconds."""
    import datetime as dt

    when = time.time() if seconds is None else seconds
    return dt.datetime.fromtimestamp(when, dt.timezone.utc).isoformat(timespec="microseconds")


def measure_ceiling(config: Config, asked: Asked) -> Ceiling | None:
    """``dliobench ceiling``: what this host's loader delivers per rank from memory (cached);
    rank 0 gets the world it was measured in, the value, the cache file and, for a jpeg
    workload that decodes, each decoder's images/s per core (others: None)."""
    import dliobench.formats.decode_rates as decode_rates
    from dliobench.run import ceiling

    world, comm = join(asked.launcher)
    ceiling.one_node(world)
    value = on_every_rank(world, comm, lambda: session.measure_ceiling(config, world, comm),
                          config.train.stall_timeout_s)
    if not world.is_root:
        return None
    rates = []
    if config.dataset.format == "jpeg" and config.reader.decode:  # after the probe: alone
        rates = decode_rates.measure_all(decode_rates.sample_files(
            config.dataset.record_length_bytes))
    return world, value, ceiling.cache_path(), rates


def measure_metadata(config: Config, asked: Asked, max_files: int) -> Path | None:
    """``dliobench metadata``: metadata rates over the dataset's files, said as a table and
    written to metadata.json; rank 0 gets the file (others: None)."""
    from dliobench.dataset.lock import locked
    from dliobench.results.metadata import table
    from dliobench.run.metadata import dataset_manifest, metadata_phase, write_metadata
    from dliobench.run.planning import resolve

    world, comm = join(asked.launcher)

    def work() -> dict[str, Any]:
        plan = resolve(config, world, comm)
        dataset_manifest(plan)  # before the lock, which would create the folder
        with locked(plan.backend, world, exclusive=False, doing="measured",
                    wait_s=config.storage.lock_wait_s):
            return metadata_phase(plan, world, comm, max_files)

    done = on_every_rank(world, comm, work, config.train.stall_timeout_s)
    if not (world.is_root and done):
        return None
    asked.say(table(done["metadata"]))  # before the file: shown even if it cannot be written
    return write_metadata(config, done["metadata"], world.launcher)

