"""mlpstorage's command line translated onto our keys: the front door's pure half.

MLPerf Storage users type ``mlpstorage training run --model unet3d --accelerator-type b200
...``; ``dliobench training run`` (and ``dliobench mlpstorage training run``) takes the same
words. This module says what each of mlpstorage's flags becomes here (a workload, overrides,
ranks) and, for the flags that have no meaning here, the one sentence that says what to use
instead; ``cli/mlpstorage.py`` parses argv and runs our commands with the result.

Upstream is read at mlcommons/storage@be69aeb5dccb701ae207b27820b7ae7c7bcf80b1:
``mlpstorage_py/cli/{training,checkpointing,common}_args.py`` (the flags),
``mlpstorage_py/config.py`` (models, accelerators, results folder, date format),
``mlpstorage_py/benchmarks/dlio.py`` (``--data-dir`` is ``<dir>/<model>``, the checkpoint
folder ``<folder>/<model>``, subset mode below the closed rank count) and
``mlpstorage_py/rules/utils.py`` ``generate_output_location`` (the results layout). The later
CLIs' flags (``mlpstorage_py/cli``@dfe7b1f, ``training_args.py``@36dcedf) are in
``cli/mlpstorage_args.py``; the storage selection in ``config.mlps_storage``.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dliobench.base.errors import ConfigError

UPSTREAM = "mlcommons/storage@be69aeb5dccb701ae207b27820b7ae7c7bcf80b1"
# mlpstorage_py/config.py@be69aeb5: MODELS, ACCELERATORS, LLM_MODELS, LLM_ALLOWED_VALUES
TRAINING_MODELS = ("cosmoflow", "resnet50", "unet3d", "dlrm", "retinanet", "flux")
ACCELERATORS = ("h100", "a100", "b200", "mi355")
# each LLM's closed process count (LLM_ALLOWED_VALUES[model][3]); fewer runs subset mode
LLM_CLOSED_PROCESSES = {"llama3-8b": 8, "llama3-70b": 64, "llama3-405b": 512, "llama3-1t": 1024}
# rules/utils.py@be69aeb5 generate_output_location: <results-dir>/training/<model>/<command>/
# <datetime> and <results-dir>/checkpointing/<model>/<datetime>; DATETIME_STR's format
DATETIME_FORMAT = "%Y%m%d_%H%M%S"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


ACCEPTED = (
    ("training run", "dliobench run <model> (--results-dir DIR: output.folder=DIR, "
     "output.layout=mlpstorage)"),
    ("training datagen", "dliobench generate <model>"),
    ("training datasize", "dliobench datasize <model> (--max-accelerators, "
     "--num-client-hosts, --client-host-memory-in-gb)"),
    ("checkpointing run", "dliobench run llama3_<size> (checkpoint.* keys)"),
    ("checkpointing datasize", "the checkpoint layout's bytes (as show-config prints them)"),
    ("reports reportgen", "dliobench report DIR (--output-dir: -o)"),
    ("--model", "our workload of that name; llama3-8b is llama3_8b"),
    ("--accelerator-type", "--accelerator (the workload's profile)"),
    ("--num-accelerators, --num-processes", "ranks: started on this host with the mpi "
     "extra's mpiexec, or as many as mpiexec/srun/torchrun started"),
    ("--mpi-bin, --mpi-params, --mpi-btl, --oversubscribe, --allow-run-as-root",
     "options of that mpiexec (comm/local_launch.py)"),
    ("--file, --object, file|object", "POSIX; or S3 from upstream's BUCKET, AWS_* and "
     "STORAGE_URI_SCHEME variables"),
    ("closed|open|whatif <benchmark> [<model>] <command>", "the division-first form, as "
     "<benchmark> <command> --model <model> --closed|--open"),
    ("--data-dir DIR", "dataset.data_folder=DIR/<model>"),
    ("--checkpoint-folder DIR", "checkpoint.checkpoint_folder=DIR/<model>"),
    ("--param(s)/-p KEY=VALUE", "our overrides (DLIO's spellings map onto our keys)"),
    ("--what-if", "dliobench show-config (nothing runs)"),
    ("--debug, --verbose", "dliobench -v"),
)


@dataclass(frozen=True)
class Refused:
    """A flag of mlpstorage's with no meaning here, and what to use instead."""

    flags: str
    dest: str
    instead: str


REFUSED = (
    Refused("--exec-type docker", "exec_type", "dliobench runs where it is started; run it "
            "inside your container"),
    Refused("--dlio-bin-path", "dlio_bin_path", "dliobench is its own benchmark and runs no "
            "DLIO binary; leave the flag out"),
    Refused("--config-file", "config_file", "put the keys in a workload YAML file and run it "
            "with `dliobench run FILE`, or give them as --param KEY=VALUE"),
    Refused("--verify-lockfile", "verify_lockfile", "result.json records the dliobench "
            "version and commit of every run; leave the flag out"),
    Refused("--timeseries-interval, --max-timeseries-samples", "timeseries",
            "dliobench records per-step timings in timeline.csv, not host time series; "
            "leave the flags out"),
)


def refusal(given: Sequence[str]) -> str | None:
    """The one sentence refusing the first of ``given`` (dests of flags the user set that
    ``REFUSED`` lists), or None when none was given."""
    for r in REFUSED:
        if r.dest in given:
            return f"mlpstorage's {r.flags} has no meaning in dliobench: {r.instead}"
    return None


def flat_params(params: Iterable[Iterable[str]] | None) -> list[str]:
    """``--param``/``--params``/``-p`` values (each flag takes one or more ``KEY=VALUE``) as
    one list of our overrides; a value without '=' is one sentence."""
    out = [item for group in params or () for item in group]
    for item in out:
        if "=" not in item:
            raise ConfigError(f"--param {item!r} is not KEY=VALUE; give e.g. --param "
                              "dataset.num_files_train=8")
    return out


def remote_hosts(hosts: Iterable[str] | None) -> list[str]:
    """The hosts of ``--hosts`` (space or comma separated) that are not this one."""
    own = {socket.gethostname(), socket.getfqdn(), *LOCAL_HOSTS}
    names = [h.split(":")[0] for item in hosts or () for h in item.split(",") if h]
    return [h for h in names if h not in own]


def path_item(key: str, path: str) -> str:
    """``key=path`` as an override that stays a string whatever the path (``yes``, ``1e3``,
    ``[a]``): JSON's quoted string, which YAML reads back as it was."""
    return f"{key}={json.dumps(path)}"


def data_folder(data_dir: str, model: str) -> str:
    """mlpstorage's data folder for ``--data-dir``: ``<data-dir>/<model>``, unless the folder
    already ends with a model's name (dlio.py ``add_datadir_param``)."""
    if any(data_dir.rstrip("/").endswith(m) for m in TRAINING_MODELS):
        return data_dir
    return os.path.join(data_dir, model)


def workload_of(model: str) -> str:
    """Our shipped workload for mlpstorage's model name (``llama3-8b`` -> ``llama3_8b``)."""
    return model.replace("-", "_")


def model_of(workload: str) -> str:
    """mlpstorage's model name for one of our workloads (``llama3_8b`` -> ``llama3-8b``):
    the name its results folder carries."""
    hyphened = workload.replace("_", "-")
    return hyphened if hyphened in LLM_CLOSED_PROCESSES else workload


def checkpoint_overrides(model: str, processes: int, folder: str, writes: int,
                         reads: int) -> list[str]:
    """What mlpstorage's checkpointing flags set (dlio.py ``add_checkpoint_params``): the
    checkpoint folder ``<folder>/<model>``, the counts, and subset mode when fewer processes
    run than the model's closed count."""
    if model not in LLM_CLOSED_PROCESSES:
        raise ConfigError(f"--model {model} is not one of mlpstorage's checkpointing models; "
                          f"give one of {', '.join(LLM_CLOSED_PROCESSES)}")
    out = [path_item("checkpoint.checkpoint_folder", os.path.join(folder, model)),
           f"checkpoint.num_checkpoints_write={writes}",
           f"checkpoint.num_checkpoints_read={reads}"]
    if processes < LLM_CLOSED_PROCESSES[model]:
        out.append("checkpoint.mode=subset")
    return out
