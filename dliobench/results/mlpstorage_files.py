"""The files mlpstorage's report tools look for in a run folder, written beside our
``result.json`` and ``summary.json`` under ``output.layout: mlpstorage``.

mlpstorage's ``reports reportgen`` walks ``--results-dir`` and takes a folder for a run only
when it holds exactly one ``*_metadata.json`` (mlcommons/storage ``mlpstorage/rules.py``
``get_runs_files``@caa90c9c7d6a543de815222fff834a846823f922, the v2.0 tool; v3.0's
``mlpstorage_py/rules/utils.py``@dfe7b1f94cdd6010ee02b0f2247c32dca8cdddae takes a folder with
``summary.json`` or one metadata file). It learns what ran from DLIO's Hydra record in
``<run>/dlio_config/`` (``HYDRA_OUTPUT_SUBDIR``, ``config.py``@caa90c9; mlpstorage runs DLIO
with ``++hydra.output_subdir`` set to it): ``config.yaml``'s ``workload`` (its ``workflow``
gives the benchmark type and command, ``model.name`` the model, ``dataset``/``reader`` the
rules checks' parameters) and ``overrides.yaml`` (``workload=<name>``, then one
``++workload.<key>=<value>`` per ``--param``: what the rules judge as overridden).
(``mlpstorage_py/rules/models.py``@be69aeb5dccb701ae207b27820b7ae7c7bcf80b1
``DLIOResultParser``, ``ResultFilesExtractor``; ``rules.py``@caa90c9 ``BenchmarkResult``.)

The metadata file is named and filled as ``mlpstorage_py/benchmarks/base.py`` names and fills it
(``<benchmark_type>_<run_datetime>_metadata.json``; ``metadata``@be69aeb5: benchmark_type,
model, command, run_datetime, num_processes, accelerator, result_dir, parameters,
override_parameters, system_info, runtime, verification, executed_command,
command_output_files); ``args`` (mlpstorage's argparse namespace) has no counterpart here and
is left out, and ``dliobench`` names the result it was made from.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import yaml

from dliobench.config import mlpstorage
from dliobench.config.schema import Config
from dliobench.storage.atomic import write_atomic, write_json_atomic

HYDRA_SUBDIR = "dlio_config"
WORKLOAD_SECTIONS = ("workflow", "dataset", "reader", "train", "checkpoint", "storage", "metric")
DLIO_WORKFLOW = ("generate_data", "train", "checkpoint")  # DLIO's workflow keys (ours add one)


def dlio_model_name(workload: str) -> str:
    """The ``model.name`` DLIO's workload file gives (``llama3_8b`` -> ``llama_8b``, as in
    mlcommons/storage ``configs/dlio/workload/llama3_8b.yaml``@caa90c9)."""
    return workload.replace("llama3_", "llama_", 1) if workload.startswith("llama3_") else workload


def benchmark_type(config: dict[str, Any]) -> str:
    """mlpstorage's benchmark type of a run (``BENCHMARK_TYPES``): training unless only the
    checkpoint workflow ran."""
    flow = config.get("workflow", {})
    only_ckpt = flow.get("checkpoint") and not flow.get("train") and not flow.get("generate_data")
    return "checkpointing" if only_ckpt else "training"


def workload_doc(config: dict[str, Any], command: str = "run") -> dict[str, Any]:
    """DLIO's ``workload`` section, from our resolved configuration (plain data): our sections
    under DLIO's names, the model named as DLIO names it, DLIO's three workflow keys. A
    training run's ``generate_data`` is false, as mlpstorage's ``training run`` sets it: the
    record is of the measured run, and our generation of missing files (``generate_data``,
    ours) is a step before it, as mlpstorage's ``training datagen`` is. A ``datagen`` record's
    workflow is DLIO's datagen file's (``configs/dlio/workload/unet3d_datagen.yaml``@caa90c9:
    generate_data true, train and checkpoint false)."""
    doc: dict[str, Any] = {"model": {**config.get("model", {}),
                                     "name": dlio_model_name(config["model"]["name"])}}
    for section in WORKLOAD_SECTIONS:
        doc[section] = dict(config.get(section, {}))
    doc["workflow"] = {k: bool(doc["workflow"].get(k)) for k in DLIO_WORKFLOW}
    if command == "datagen":
        doc["workflow"] = {"generate_data": True, "train": False, "checkpoint": False}
    elif doc["workflow"]["train"]:
        doc["workflow"]["generate_data"] = False
    return doc


def _dotted(config: dict[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def overrides(config: dict[str, Any], given: tuple[str, ...], command: str = "run") -> list[str]:
    """DLIO's ``overrides.yaml``: the workload mlpstorage names (``<model>_<accelerator>`` for
    training, ``<model>_datagen`` for datagen: ``mlpstorage_py/benchmarks/dlio.py``
    ``config_name``), then each key the command line set,
    with its resolved value. Left out: our own ``output.*`` keys (mlpstorage sets Hydra's run
    folder there, not a workload key) and ``train.accelerator`` (the workload's name says it,
    as ``--accelerator-type`` picks mlpstorage's workload file)."""
    name = config["model"]["name"]
    accel = _dotted(config, "train.accelerator")
    suffix = "datagen" if command == "datagen" else accel
    workload = name if benchmark_type(config) == "checkpointing" or not suffix \
        else f"{name}_{suffix}"
    items = [f"workload={workload}"]
    for key in given:
        if key != "train.accelerator" and key.split(".")[0] in (*WORKLOAD_SECTIONS, "model"):
            items.append(f"++workload.{key}={_dotted(config, key)}")
    return items


def write_dlio_config(run_dir: Path, config: Config, config_data: dict[str, Any],
                      command: str = "run") -> None:
    """``<run_dir>/dlio_config/``: ``config.yaml``, ``overrides.yaml`` and ``hydra.yaml`` (the
    three the submission checker asks for, ``_DLIO_CONFIG_REQUIRED_FILES`` in
    ``mlpstorage_py/rules/datagen_hierarchy.py``@e4214c3b71690c6b6f184a7cc983acee5656fb92),
    as DLIO's Hydra writes them when a run starts; ``hydra.yaml`` holds what of Hydra's own
    settings has a counterpart here (run folder, output subfolder, task overrides)."""
    folder = run_dir / HYDRA_SUBDIR
    folder.mkdir(exist_ok=True)
    task = overrides(config_data, config.given, command)
    docs = {"config.yaml": {"workload": workload_doc(config_data, command)},
            "overrides.yaml": task,
            "hydra.yaml": {"hydra": {"run": {"dir": str(run_dir)}, "output_subdir": HYDRA_SUBDIR,
                                     "overrides": {"task": task},
                                     "job": {"name": "dliobench"}}}}
    for name, doc in docs.items():
        write_atomic(folder / name, _dumper(yaml.safe_dump(doc, sort_keys=False).encode()))


def _dumper(text: bytes) -> Callable[[IO[bytes]], object]:
    """A writer of ``text`` for ``write_atomic``."""
    return lambda handle: handle.write(text)


def _seconds(result: dict[str, Any]) -> float | None:
    try:
        start = dt.datetime.fromisoformat(result["started_at"])
        return (dt.datetime.fromisoformat(result["finished_at"]) - start).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def metadata_doc(run_dir: Path, config: dict[str, Any], command: str,
                 facts: dict[str, Any]) -> dict[str, Any]:
    """mlpstorage's metadata of a run or a datagen, from its configuration (plain data), its
    ``dlio_config`` and ``facts``: ranks, runtime (s), argv, run_id."""
    kind = benchmark_type(config)
    given = yaml.safe_load((run_dir / HYDRA_SUBDIR / "overrides.yaml").read_text()) or []
    params = {k[len("++workload."):]: v for k, _, v in (i.partition("=") for i in given)
              if k.startswith("++workload.")}
    return {"benchmark_type": kind, "model": mlpstorage.model_of(config["model"]["name"]),
            "command": command, "run_datetime": run_dir.name,
            "num_processes": facts.get("ranks"),
            "accelerator": _dotted(config, "train.accelerator")
            if kind == "training" and command == "run" else None,
            "result_dir": str(run_dir), "parameters": workload_doc(config, command),
            "override_parameters": params, "system_info": None, "runtime": facts.get("runtime"),
            "verification": None, "executed_command": shlex.join(facts.get("argv") or []),
            "command_output_files": [],
            "dliobench": {"result": "result.json" if command == "run" else None,
                          "run_id": facts.get("run_id")}}


def write_metadata(run_dir: Path, result: dict[str, Any]) -> Path | None:
    """Commit the metadata file of a finished run whose folder has the ``dlio_config`` record
    (runs under ``output.layout: mlpstorage``); None elsewhere."""
    if not (run_dir / HYDRA_SUBDIR / "overrides.yaml").is_file():
        return None
    facts = {"ranks": result.get("ranks_count"), "runtime": _seconds(result),
             "argv": result.get("provenance", {}).get("argv"), "run_id": result.get("run_id")}
    return write_metadata_doc(run_dir, result.get("config", {}), "run", facts)


def write_metadata_doc(run_dir: Path, config: dict[str, Any], command: str,
                       facts: dict[str, Any]) -> Path:
    """Commit ``metadata_doc`` as ``<benchmark_type>_<run_datetime>_metadata.json``."""
    path = run_dir / f"{benchmark_type(config)}_{run_dir.name}_metadata.json"
    write_json_atomic(path, metadata_doc(run_dir, config, command, facts))
    return path
