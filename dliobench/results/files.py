"""A run's ``result.json``: written atomically, read back with its schema version checked.

One module writes and reads it, so every reader (report, sweep, max-accelerator search,
trace) gets a ``RunResult`` or one sentence saying why the file is not one it can read.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dliobench.base.errors import DlioBenchError, InputError
from dliobench.config import mlpstorage
from dliobench.config.schema import Config
from dliobench.config.secrets import redact_config
from dliobench.results.dlio_outputs import write_datagen_outputs, write_run_outputs
from dliobench.results.dlio_summary import SUMMARY_NAME, datagen_summary, dlio_summary
from dliobench.results.mlpstorage_files import (
    HYDRA_SUBDIR,
    benchmark_type,
    write_dlio_config,
    write_metadata,
    write_metadata_doc,
)
from dliobench.results.schema import SCHEMA_MAJOR, RunResult, parse_version
from dliobench.results.sysinfo import machine
from dliobench.results.typed import first_mismatch

if TYPE_CHECKING:
    from dliobench.comm.world import Comm, World
    from dliobench.results.timeline import Timeline
from dliobench.storage.atomic import write_json_atomic
from dliobench.storage.posix_io import read_text

RESULT_NAME = "result.json"
REQUIRED = ("run_id", "status", "metrics", "config")


def new_run_id(workload: str) -> str:
    """``YYYYmmdd-HHMMSS-<workload>-<6 hex>``."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in workload) or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-{secrets.token_hex(3)}"


def run_parent(config: Config, command: str = "run") -> Path:
    """The folder run folders go in: ``output.folder``, or under ``output.layout:
    mlpstorage`` mlpstorage's ``training/<model>/<command>`` or ``checkpointing/<model>``
    below it (rules/utils.py ``generate_output_location``, mlpstorage.UPSTREAM); ``command``
    is ``run``, ``datagen``, or ``metadata`` for our metadata phase, which mlpstorage has
    not (its folder named in the same pattern)."""
    root = Path(config.output.folder)
    if config.output.layout != "mlpstorage":
        return root
    model = mlpstorage.model_of(config.name)
    if config.workflow.checkpoint_only and command == "run":
        return root / "checkpointing" / model
    return root / "training" / model / command


def make_run_dir(config: Config, run_id: str, command: str = "run") -> Path:
    """Create and return a new run's folder: ``<parent>/<run_id>``, or under the mlpstorage
    layout ``<parent>/<YYYYMMDD_HHMMSS>``, waiting for the next second when a run of this
    second already has that name (names stay mlpstorage's, and no run shares a folder)."""
    parent = run_parent(config, command)
    for _ in range(5):
        name = run_id if config.output.layout != "mlpstorage" else \
            time.strftime(mlpstorage.DATETIME_FORMAT)
        run_dir = parent / name
        try:
            run_dir.mkdir(parents=True, exist_ok=False)
            return run_dir
        except FileExistsError:
            if config.output.layout != "mlpstorage":
                break
            time.sleep(1.0 - time.time() % 1.0 + 0.01)
        except OSError as exc:
            raise DlioBenchError(f"cannot create the run folder {run_dir}: {exc.strerror}; "
                                 "free space or choose another output.folder") from None
    raise DlioBenchError(f"the run folder {run_dir} exists already; choose another "
                         "output.folder")


def open_run_folder(config: Config, world: World, comm: Comm) -> tuple[str, Path]:
    """The run's id and its folder (``make_run_dir``): rank 0 chooses both and creates the
    folder, every rank gets them (a folder that cannot be made is one sentence)."""
    run_id = new_run_id(config.name)
    made = str(_start_run_dir(config, run_id)) if world.is_root else ""
    run_id, folder = comm.bcast((run_id, made) if world.is_root else ("", ""))
    return run_id, Path(folder)


def _start_run_dir(config: Config, run_id: str) -> Path:
    """A new run's folder; under mlpstorage's layout it holds DLIO's ``dlio_config`` record
    from the start, as DLIO's Hydra writes it (``results.mlpstorage_files``)."""
    run_dir = make_run_dir(config, run_id)
    if config.output.layout == "mlpstorage":
        try:
            write_dlio_config(run_dir, config, config_dict(config))
        except OSError as exc:
            raise DlioBenchError(f"cannot write {run_dir}/dlio_config: {exc.strerror}; free "
                                 "space or choose another output.folder") from None
    return run_dir


def write_datagen_record(config: Config, facts: dict[str, Any]) -> Path:
    """mlpstorage's record of a data generation, ``training/<model>/datagen/<stamp>/`` (its
    ``training datagen`` writes one there; v3.0's reportgen and submission checker look for
    it): DLIO's ``dlio_config`` and the metadata file (``results.mlpstorage_files``);
    ``facts``: ranks, runtime (s), argv, run_id."""
    run_dir = make_run_dir(config, facts.get("run_id") or new_run_id(config.name), "datagen")
    try:
        data = config_dict(config)
        write_dlio_config(run_dir, config, data, "datagen")
        write_metadata_doc(run_dir, data, "datagen", facts)
        write_datagen_outputs(run_dir, datagen_summary(data, {**facts, "machine": machine()}))
    except OSError as exc:
        raise DlioBenchError(f"cannot write the datagen record in {run_dir}: {exc.strerror}; "
                             "free space or choose another output.folder") from None
    return run_dir


def config_dict(config: Config) -> dict[str, Any]:
    """The resolved configuration as plain data, credentials redacted (``config.secrets``)."""
    out = dataclasses.asdict(config)
    out.pop("source", None)
    out.pop("given", None)
    return redact_config(out)


def write_result(run_dir: Path, result: RunResult, replace: bool = True) -> bool:
    """Commit ``<run_dir>/result.json``; with ``replace=False`` a result already there wins
    (False returned). A complete run gets DLIO's ``summary.json`` beside it (after it, from
    it: ``results.dlio_summary``); a partial one none, as DLIO writes none for a failed run.
    Under mlpstorage's layout a complete run also gets mlpstorage's metadata file."""
    written = write_json(run_dir / RESULT_NAME, result, replace)
    if written and result.get("status") == "complete":
        from dliobench.results.figures import fill

        write_json(run_dir / SUMMARY_NAME, fill(dlio_summary(cast(dict[str, Any], result)),
                                                result, SUMMARY_NAME, "dliobench"))
        try:
            write_metadata(run_dir, cast(dict[str, Any], result))
        except OSError as exc:
            raise DlioBenchError(f"cannot write the metadata file in {run_dir}: "
                                 f"{exc.strerror}; free space or choose another "
                                 "output.folder") from None
    return written


def write_leaf_outputs(run_dir: Path, result: RunResult, timelines: list[Timeline]) -> None:
    """Under mlpstorage's layout (a ``dlio_config`` record in the folder), a complete
    training or checkpointing run's other files the submission checker asks for
    (``results.dlio_outputs``); elsewhere, and for a KV-cache run, nothing."""
    doc = cast(dict[str, Any], result)
    if (doc.get("status") != "complete" or doc.get("kvcache") is not None
            or not (run_dir / HYDRA_SUBDIR).is_dir()):
        return
    write_run_outputs(run_dir, doc, dlio_summary(doc), timelines,
                      benchmark_type(doc.get("config", {})))


def write_partial_result(run_dir: Path, result: RunResult, rank: int) -> Path:
    """Commit one rank's partial result and say where it went.

    The first rank to end early owns ``result.json`` (the failing rank writes before the
    launcher stops the others, so its measurements are the ones reports show); a rank that
    comes later keeps its own beside it as ``partial-rank<N>.json``, so nothing is lost.
    """
    if write_result(run_dir, result, replace=False):
        return run_dir / RESULT_NAME
    beside = run_dir / f"partial-rank{rank}.json"
    write_json(beside, result)
    return beside


def write_json(path: Path, doc: Any, replace: bool = True) -> bool:
    """Commit one of our small JSON files (a result, a sweep summary) atomically."""
    try:
        return write_json_atomic(path, doc, replace=replace)
    except OSError as exc:
        raise DlioBenchError(f"cannot write {path}: {exc.strerror}; free space or choose "
                             "another output.folder") from None


def read_result(run_dir: str | Path) -> RunResult:
    """A run folder's result, or DlioBenchError saying in one sentence why it is not one.

    A result of another schema major version is refused; a newer minor version is read (its
    extra fields are kept). Every field the schema declares, nested ones too, must hold its
    declared type (``typed.first_mismatch``), so no reader meets a figure of the wrong kind.
    """
    path = Path(run_dir) / RESULT_NAME
    try:
        doc = json.loads(read_text(path))  # a FIFO is refused, not waited on
    except FileNotFoundError:
        raise InputError(f"{run_dir}: no {RESULT_NAME} in it, so it is not a dliobench run "
                         "folder") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise InputError(f"{path} cannot be read ({reason}); leave that folder out") from None
    version = parse_version(doc.get("schema_version")) if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or version is None or any(k not in doc for k in REQUIRED):
        raise InputError(f"{path} is not a dliobench result (no schema_version, run_id, "
                         "status, metrics and config); leave that folder out")
    if version[0] != SCHEMA_MAJOR:
        raise InputError(f"{path} has result schema {doc['schema_version']}; this dliobench "
                         f"reads schema {SCHEMA_MAJOR}.x: use the dliobench version that "
                         f"wrote it ({doc.get('dliobench_version', 'unknown')})")
    wrong = first_mismatch(doc, RunResult)
    if wrong is not None:
        raise InputError(f"{path}: {wrong}, so it was edited or damaged after the run "
                         "wrote it; run it again, or leave that folder out")
    return cast(RunResult, doc)
