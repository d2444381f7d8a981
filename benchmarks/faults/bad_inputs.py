"""Feed the real CLI bad input of every kind and count how it ends.

Usage: python -m benchmarks.faults.bad_inputs [--jobs N] [--timeout S] [--only TEXT] [--keep]
Each case runs ``python -m dliobench ...`` as a subprocess in a folder of its own under a
temporary folder: every numeric key negative, of the wrong type and beyond int64, every
string key with a NUL byte, folder keys empty, defective workload and sweep YAML (syntax,
duplicate keys, alias bombs, non-UTF-8, oversized, not a mapping), CLI numbers, checkpoints
without a model, more ranks than samples (under mpiexec when there is one), report on
files that are not results, run sets that cannot be run (``--repeat``), half an S3 key
pair, a real result with fields of the wrong type (report, predict --from, check), and a
dataset file of the wrong size or with a flipped byte. Expected of each: exit code 2 (1 for
the dataset) and one error line on stderr.
Counted: traceback, hang (timeout), false success (exit 0), other exit code, more than one
error line, vague (the line does not name what the case says it must). Exits 1 when any case
had a traceback, a hang, a false success or a vague line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.faults.case import said_lines
from benchmarks.harness.records import Recorder
from dliobench.config.load import FIELDS, INT64_MAX

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = b"train: {epochs: 1}\n"
HUGE = str(INT64_MAX * 1000)


@dataclass
class Case:
    """One bad input: the CLI arguments and the files written first."""

    name: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    mpi_ranks: int = 0  # run under mpiexec -n this many
    env: dict[str, str] = field(default_factory=dict)  # set for this case ("": unset)
    before: list[list[str]] = field(default_factory=list)  # commands that must succeed first
    damage: Callable[[Path], None] | None = None  # then done to the case's folder
    expect: int = 2  # the exit code wanted (a dataset's fault is 1)
    says: str = ""  # what the error line must name (else: "vague")


@dataclass
class Outcome:
    """How a case ended."""

    case: Case
    code: int | None
    seconds: float
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        """stderr without argparse's usage block, and without warnings and notes (a run that
        ends early says where its partial result is, on an indented second line; a launch
        names its command on an INFO line)."""
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        if lines and lines[0].startswith("usage:"):
            return [ln for ln in lines if "error:" in ln]
        return said_lines(self.stderr)

    def flags(self) -> list[str]:
        """What went wrong: traceback, hang, false-success, code, lines."""
        out = []
        if "Traceback" in self.stderr:
            out.append("traceback")
        if self.code is None:
            out.append("hang")
        elif self.code == 0:
            out.append("false-success")
        elif self.code != self.case.expect:
            out.append("code")
        if self.code is not None and len(self.error_lines) > 1:
            out.append("lines")
        if self.code is not None and self.case.says not in self.stderr:
            out.append("vague")
        return out


def key_cases() -> list[Case]:
    """Every key: wrong type; numbers negative and beyond int64; strings with NUL; folders
    empty."""
    cases = []
    for name, f in sorted(FIELDS.items()):
        meta = f.metadata
        kind = meta["kind"]
        cases.append(Case(f"{name} wrong type", ["show-config", f"{name}={{a: 1}}"]))
        if kind in ("int", "size", "float", "seconds"):
            low = meta["minimum"]
            negative = -2 if low is None or low < 0 else -1
            if name == "train.total_training_steps":
                negative = -5
            # an axis counts from the end when negative: which are wrong depends on the
            # member's shape, checked when the files are read, not by show-config
            if name != "dataset.npz_sample_axis":
                cases.append(Case(f"{name} negative", ["show-config", f"{name}={negative}"]))
            huge = "1e400" if kind in ("float", "seconds") else HUGE
            cases.append(Case(f"{name} huge", ["show-config", f"{name}={huge}"]))
        if kind in ("str", "path", "name", "choice"):
            cases.append(Case(f"{name} NUL", ["show-config", f'{name}="a\\0b"']))
        if meta["nonempty"]:
            cases.append(Case(f"{name} empty", ["show-config", f"{name}="]))
        if kind == "name":
            cases.append(Case(f"{name} slash", ["show-config", f"{name}=a/b"]))
        if kind == "bool":
            cases.append(Case(f"{name} not a bool", ["show-config", f"{name}=maybe"]))
    return cases


BOMB = b"profiling:\n" + b'  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + \
    b"".join(f"  a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]\n".encode() for i in range(1, 10))
WORKLOAD_DEFECTS = {
    "not UTF-8": b"dataset:\n  format: \xff\xfe\n",
    "UTF-16 with BOM": "train: {epochs: 1}\n".encode("utf-16"),
    "a list": b"- a\n- b\n",
    "a scalar": b"42\n",
    "empty document": b"",
    "section as list": b"train: [1, 2]\n",
    "section as scalar": b"workflow: yes\n",
    "key as mapping": b"train:\n  epochs: {a: 1}\n",
    "key as list": b"dataset:\n  num_files_train: [1, 2]\n",
    "duplicate section": b"dataset: {format: npz}\ndataset: {format: npy}\n",
    "duplicate key": b"train:\n  epochs: 1\n  epochs: 2\n",
    "syntax error": b"dataset: {format: [unclosed\n",
    "tab indentation": b"train:\n\tepochs: 1\n",
    "NUL byte": b"dataset: {format: \x00}\n",
    "alias bomb": BOMB,
    "recursive alias": b"profiling: &a [*a]\n",
    "oversized": b"# " + b"x" * (1 << 20) + b"\n",
    "unknown section": b"datset: {format: npz}\n",
    "negative seed": b"train: {seed: -1}\n",
    "checkpoint without model": b"workflow: {checkpoint: true}\n",
    "checkpoint without training": b"workflow: {checkpoint: true, train: false}\n"
                                   b"model: {model_size_bytes: 1000}\n",
    "accelerators as list": b"accelerators: [a100]\n",
    "bad accelerator profile": b"accelerators: {h100: {computation_time: -x, au: 2}}\n"
                               b"train: {accelerator: h100}\n",
    "unhashable key": b"dataset:\n  ? [a, b]\n  : 1\n",
}
SWEEP_DEFECTS = {
    "syntax error": b"workload: w.yaml\naxes: {ranks: [1\n",
    "not a mapping": b"- workload\n",
    "duplicate key": b"workload: w.yaml\nworkload: w.yaml\n",
    "ranks zero": b"workload: w.yaml\naxes: {ranks: [0, 2]}\n",
    "ranks text": b"workload: w.yaml\naxes: {ranks: [a]}\n",
    "overrides as text": b"workload: w.yaml\noverrides: train.epochs=2\n",
    "axis key a number": b"workload: w.yaml\naxes: {1: [2]}\n",
    "workload a list": b"workload: [w.yaml]\n",
    "no workload": b"axes: {ranks: [1]}\n",
    "alias bomb": BOMB.replace(b"profiling:", b"workload: w.yaml\nname:"),
    "not UTF-8": b"workload: \xff\n",
    "bad axis value": b"workload: w.yaml\naxes: {reader.batch_size: [-1]}\n",
}
RESULTS = {
    "empty object": b"{}",
    "empty file": b"",
    "truncated": b'{"schema_version": 1, "run_id": "x", "st',
    "a list": b'["a", "b"]',
    "other schema": b'{"schema_version": 9, "run_id": "x", "status": "complete", '
                    b'"metrics": {}, "config": {}}',
    "metrics a list": b'{"schema_version": 1, "run_id": "x", "status": "complete", '
                      b'"metrics": [], "config": {}}',
    "not UTF-8": b'{"a": "\xff"}',
}


def file_cases() -> list[Case]:
    """Defective workload, sweep and result files."""
    cases = [Case(f"workload {name}", ["show-config", "w.yaml"], {"w.yaml": text})
             for name, text in WORKLOAD_DEFECTS.items()]
    cases += [Case(f"workload {name} (run)", ["run", "w.yaml", "--no-progress"],
                   {"w.yaml": WORKLOAD_DEFECTS[name]})
              for name in ("alias bomb", "duplicate key", "checkpoint without model",
                           "checkpoint without training")]
    cases += [Case(f"sweep {name}", ["sweep", "s.yaml", "--dry-run"],
                   {"s.yaml": text, "w.yaml": WORKLOAD}) for name, text in SWEEP_DEFECTS.items()]
    for name, text in RESULTS.items():
        cases.append(Case(f"report: result.json {name}", ["report", "run", "-o", "out"],
                          {"run/result.json": text}))
        cases.append(Case(f"report: result.json {name}, file given",
                          ["report", "run/result.json", "-o", "out"], {"run/result.json": text}))
        cases.append(Case(f"check: result.json {name}", ["check", "run"],
                          {"run/result.json": text}))
    cases.append(Case("check: result.json without the config it checks", ["check", "run"],
                      {"run/result.json": b'{"schema_version": 1, "run_id": "x", '
                       b'"status": "complete", "metrics": {}, "config": {}}'}))
    cases.append(Case("check: missing folder", ["check", "nope"]))
    cases.append(Case("report: foreign file", ["report", "notes.json"], {"notes.json": b"{}"}))
    cases.append(Case("report: missing folder", ["report", "nope"]))
    cases.append(Case("report: empty folder", ["report", "empty"], {"empty/.keep": b""}))
    cases += front_door_cases()  # mlpstorage's command lines (docs/mlpstorage.md)
    return cases


def trace_cases() -> list[Case]:
    """``workload from-trace`` / ``compare`` on what is not a usable trace or replay."""
    py = (b'1 10:00:00.000001 openat(AT_FDCWD, "/x/a.py", O_RDONLY) = 3 <0.000010>\n'
          b'1 10:00:00.000002 read(3, "import"..., 4096) = 40 <0.000010>\n')
    ft = ["workload", "from-trace"]
    return [Case("trace: missing", [*ft, "nope", "-o", "j.yaml"], says="does not exist"),
            Case("trace: not a trace", [*ft, "t.txt", "-o", "j.yaml"], {"t.txt": b"hi\n"},
                 says="neither strace"),
            Case("trace: no data files", [*ft, "t.strace", "-o", "j.yaml"], {"t.strace": py},
                 says="no reads of data files"),
            Case("trace: empty .pfw folder", [*ft, "pfw", "-o", "j.yaml"], {"pfw/.keep": b""},
                 says="no .pfw"),
            Case("trace: --batch-size 0", [*ft, "t", "-o", "j", "--batch-size", "0"],
                 says="--batch-size"),
            Case("compare: run without --trace-io", ["workload", "compare", "t.txt", "run"],
                 {"t.txt": b"hi\n", "run/x": b""}, says="io-trace"),
            Case("run: read_requests nonsense", ["run", "reader.read_requests=12",
                                                 "--no-progress"], says="read_requests")]


def cli_cases() -> list[Case]:
    """CLI options with values that make no sense; commands with bad overrides."""
    cases = []
    for value in ("-3", "0", "x", "1.5", HUGE, HUGE + "x"):
        cases.append(Case(f"datasize --accelerators {value}",
                          ["datasize", "--accelerators", value]))
    for option in ("--hosts",):
        cases += [Case(f"datasize {option} {v}", ["datasize", option, v]) for v in ("-1", "0")]
    cases += [Case(f"datasize --host-memory-gb {v}", ["datasize", "--host-memory-gb", v])
              for v in ("-1", "0", "nan", "inf", "1e300")]
    cases += [Case(f"sweep --max-accelerators {v}", ["sweep", "w.yaml",
                                                      "--find-max-accelerators",
                                                      "--max-accelerators", v],
                   {"w.yaml": WORKLOAD}) for v in ("0", "-2")]
    cases += [Case(f"sweep --timeout {v}", ["sweep", "w.yaml", "--timeout", v],
                   {"w.yaml": WORKLOAD}) for v in ("-5", "0")]
    cases.append(Case("keys: unknown section", ["keys", "readr"], says="reader"))
    cases.append(Case("run train.device=cuda, no GPU", ["run", "train.device=cuda",
                                                        "--no-progress"], says="GPU"))
    cases += [Case(f"nodes {k} x {p}", ["nodes", "--nodes", k, "--ranks-per-node", p, "--",
                                        "run", "w.yaml"], {"w.yaml": WORKLOAD})
              for k, p in (("0", "2"), ("2", "-1"))]
    cases += [Case("nodes without a command", ["nodes", "--nodes", "2", "--ranks-per-node",
                                               "2"]),
              Case("nodes --local relative", ["nodes", "--nodes", "1", "--ranks-per-node", "1",
                                              "--local", "rel", "--", "run", "w.yaml"],
                   {"w.yaml": WORKLOAD})]
    cases += [Case("run --output ''", ["run", "--output", "", "--no-progress"]),
              Case("report -o ''", ["report", "x", "-o", ""]),
              Case("run file_prefix with /", ["run", "dataset.file_prefix=a/b"]),
              Case("generate empty data_folder", ["generate", "dataset.data_folder="]),
              Case("generate negative seed", ["generate", "dataset.generation_seed=-1"]),
              Case("run negative seed", ["run", "train.seed=-1"]),
              # reader.decoder decodes jpeg where dliobench decodes (formats/_decoders.py)
              Case("run reader.decoder on npz", ["run", "reader.decoder=simplejpeg"],
                   says="reader.decoder"),
              Case("run reader.decoder with DALI's own reader",
                   ["run", "retinanet", "reader.decoder=dali", "reader.data_loader=dali",
                    "reader.dali_native_reader=true"], says="dali_native_reader"),
              Case("run checkpoint without model", ["run", "workflow.checkpoint=true"]),
              Case("override duplicate key",
                   ["show-config", "train.computation_time={mean: 1, mean: 2}"]),
              Case("missing workload", ["show-config", "nope.yaml"]),
              Case("workload is a folder", ["show-config", "d.yaml"], {"d.yaml/x": b""}),
              # bounds: more than this host's memory per rank, refused before any work
              Case("generate 1e8 files", ["generate", "dataset.num_files_train=1e8",
                                          "dataset.record_length_bytes=1",
                                          "dataset.record_length_bytes_stdev=0"]),
              Case("run 1e8 files", ["run", "dataset.num_files_train=1e8",
                                     "dataset.record_length_bytes=1",
                                     "dataset.record_length_bytes_stdev=0", "--no-progress"]),
              Case("run resize 20GB", ["run", "dataset.record_length_bytes_resize=20GB",
                                       "--no-progress"]),
              Case("run 2 GB png", ["run", "dataset.format=png",
                                    "dataset.record_length_bytes=2GB", "--no-progress"]),
              Case("run 1 TB samples", ["run", "dataset.record_length_bytes=1TB",
                                        "--no-progress"])]
    cases += run_set_cases()
    if shutil.which("mpiexec") or (Path(sys.executable).parent / "mpiexec").exists():
        cases.append(Case("3 ranks, 2 files, drop_last=false (mpiexec)",
                          ["run", "dataset.num_files_train=2", "reader.drop_last=false",
                           "dataset.data_folder=data", "--no-progress"], mpi_ranks=3))
    return cases


def run_set_cases() -> list[Case]:
    """``run --repeat``/``--run-set`` that cannot make a set: no count, a split checkpoint
    phase repeated, nothing to run (refused before any run)."""
    llama = str(ROOT / "workloads" / "llama3_8b.yaml")
    cases = [Case(f"run --repeat {v}", ["run", "--repeat", v, "--no-progress"], says="--repeat")
             for v in ("0", "-1", "x", HUGE)]
    return [*cases,
            Case("run --repeat 3, checkpoint write phase only",
                 ["run", llama, "--repeat", "3", "checkpoint.num_checkpoints_read=0",
                  "--no-progress"], says="split form"),
            Case("run --repeat 2, checkpoint read phase only",
                 ["run", llama, "--repeat", "2", "checkpoint.num_checkpoints_write=0",
                  "--no-progress"], says="split form"),
            Case("run --run-set, checkpoints of neither kind",
                 ["run", llama, "--run-set", "checkpoint.num_checkpoints_write=0",
                  "checkpoint.num_checkpoints_read=0", "--no-progress"], says="both 0")]


def kvcache_cases() -> list[Case]:
    """``dliobench kvcache``'s upstream options out of range, a storage tier that is a file
    or out of reach (the storage's fault: exit 1), a replay file that is not ShareGPT's."""
    small = ["kvcache", "--model", "tiny-1b", "--max-requests", "2", "--entry-scale", "0.001"]
    return [Case("kvcache --num-users 0", [*small, "--num-users", "0"], says="num_users"),
            Case("kvcache --duration abc", [*small, "--duration", "abc"], says="duration"),
            Case("kvcache --model gpt-5", [*small, "--model", "gpt-5"], says="kvcache.model"),
            Case("kvcache --cache-dir a file", [*small, "--cache-dir", "f"],
                 files={"f": b"x"}, expect=1, says="f/"),
            Case("kvcache --cache-dir unreachable s3",
                 [*small, "--cpu-mem-gb", "0", "--cache-dir", "s3://bucket/kv",
                  "storage.s3.endpoint_url=http://127.0.0.1:9", "storage.s3.max_attempts=1"],
                 env=NO_AWS, expect=1, says="s3://bucket/kv"),
            Case("kvcache --dataset-path not JSON", [*small, "--dataset-path", "d.json"],
                 files={"d.json": b"{not json"}, says="d.json"),
            Case("kvcache --autoscaler-mode fast",
                 [*small, "--enable-autoscaling", "--autoscaler-mode", "fast"],
                 says="autoscaler_mode"),
            Case("kvcache autoscaler_interval 0",
                 [*small, "--enable-autoscaling", "kvcache.autoscaler_interval=0"],
                 says="autoscaler_interval")]


S3_RUN = ["run", "dataset.data_folder=s3://bucket/data", "--no-progress",
          "storage.s3.endpoint_url=http://127.0.0.1:9", "storage.s3.max_attempts=1"]
NO_AWS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "",
          "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
          "AWS_EC2_METADATA_DISABLED": "true"}


def s3_cases() -> list[Case]:
    """Half an S3 key pair, in the configuration or the environment (refused before any
    request, so the endpoint need not answer)."""
    secret, key_id = "storage.s3.secret_access_key=s3cr3t", "storage.s3.access_key_id=AKIAX"
    return [Case("s3: secret key only", [*S3_RUN, secret], env=NO_AWS),
            Case("s3: secret key, key id in the environment", [*S3_RUN, secret],
                 env={**NO_AWS, "AWS_ACCESS_KEY_ID": "AKIAX"}),
            Case("s3: key id only", [*S3_RUN, key_id], env=NO_AWS),
            Case("s3: AWS_ACCESS_KEY_ID only", S3_RUN,
                 env={**NO_AWS, "AWS_ACCESS_KEY_ID": "AKIAX"})]


def slurm_cases() -> list[Case]:
    """A Slurm step's variables that srun would not set, --launcher slurm outside srun, and
    a step of 2 tasks without a PMI (each would run alone): refused before any work."""
    step = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2"}
    return [Case("run --launcher slurm outside srun", ["run", "--launcher", "slurm",
                                                       "--no-progress"], says="srun"),
            Case("run in a Slurm step of 'x' tasks", ["run", "--no-progress"],
                 env={**step, "SLURM_STEP_NUM_TASKS": "x"}, says="SLURM_STEP_NUM_TASKS"),
            Case("run in a Slurm step, garbled tasks per node", ["run", "--no-progress"],
                 env={**step, "SLURM_STEP_TASKS_PER_NODE": "2x"},
                 says="SLURM_STEP_TASKS_PER_NODE"),
            Case("run in a 2-task Slurm step without PMI", ["run", "--no-progress"],
                 env=step, says="--mpi=pmi2")]


TINY = (b"model: {name: tiny}\ntrain: {epochs: 1, computation_time: 0.001}\n"
        b"dataset: {data_folder: data, format: npz, num_files_train: 16, "
        b"num_samples_per_file: 1, record_length_bytes: 65536}\n"
        b"reader: {batch_size: 2, read_threads: 2, prefetch_size: 2}\n")
RUN_TINY = ["run", "w.yaml", "--no-progress", "--output", "runs"]


def edit_result(**fields: object) -> Callable[[Path], None]:
    """Set fields (``metrics.au``, ``ranks.0.samples``) of the one result under runs/."""
    def damage(folder: Path) -> None:
        (path,) = (folder / "runs").glob("*/result.json")
        doc = json.loads(path.read_text())
        for name, value in fields.items():
            *parents, last = [int(p) if p.isdigit() else p for p in name.split(".")]
            node = doc
            for p in parents:
                node = node[p]
            node[last] = value
        path.write_text(json.dumps(doc))
    return damage


def truncate_a_file(folder: Path) -> None:
    """Cut the fourth data file of the dataset to 1000 bytes (it exists, of the wrong size)."""
    os.truncate(sorted((folder / "data" / "train").glob("*.npz"))[3], 1000)


def flip_a_data_byte(folder: Path) -> None:
    """Flip one byte of the ninth data file's samples (its size and headers unchanged: read
    through the first file's headers, its CRC-32 checked in C)."""
    path = sorted((folder / "data" / "train").glob("*.npz"))[8]
    data = bytearray(path.read_bytes())
    data[30_000] ^= 0x01
    path.write_bytes(bytes(data))


def damaged_cases() -> list[Case]:
    """A real run's result with fields of the wrong type, read by each reader; a dataset with
    a file of the wrong size."""
    typed = {"report: metrics.au high, ranks_count two": (
                 ["report", "runs", "-o", "out"], {"metrics.au": "high", "ranks_count": "two"},
                 "ranks_count"),
             "predict --from: time_shares a string": (
                 ["predict", "--from", "runs"], {"time_shares": "compute"}, "time_shares"),
             "check: verdict.meets_floor a string": (
                 ["check", "runs"], {"verdict.meets_floor": "yes"}, "verdict.meets_floor"),
             "report: ranks[0].samples a string": (
                 ["report", "runs", "-o", "out"], {"ranks.0.samples": "12"}, "ranks[0].samples")}
    cases = [Case(f"result field {name}", argv, {"w.yaml": TINY}, before=[RUN_TINY],
                  damage=edit_result(**fields), says=says)
             for name, (argv, fields, says) in typed.items()]
    cases.append(Case("dataset file of the wrong size", [
        "run", "w.yaml", "--no-progress", "workflow.generate_data=false"], {"w.yaml": TINY},
        before=[["generate", "w.yaml", "--no-progress"]], damage=truncate_a_file, expect=1,
        says="img_0000003.npz is 1,000 bytes where 65,812 were written"))
    cases.append(Case("dataset file with a flipped byte in its samples", [
        "run", "w.yaml", "--no-progress", "workflow.generate_data=false"], {"w.yaml": TINY},
        before=[["generate", "w.yaml", "--no-progress"]], damage=flip_a_data_byte, expect=1,
        says="CRC-32 mismatch"))
    return cases


def run_case(case: Case, folder: Path, timeout: float) -> Outcome:
    """Run one case in ``folder``."""
    folder.mkdir(parents=True)
    for name, data in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    for before in case.before:
        subprocess.run([sys.executable, "-m", "dliobench", *before], cwd=folder, check=True,
                       capture_output=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    if case.damage is not None:
        case.damage(folder)
    argv = [sys.executable, "-m", "dliobench", *case.argv]
    if case.mpi_ranks:
        local = Path(sys.executable).parent / "mpiexec"
        argv = [str(local) if local.exists() else "mpiexec", "-n", str(case.mpi_ranks), *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "XDG_CACHE_HOME": str(folder.parent / ".cache"),  # matplotlib's font cache: once
           **case.env}
    env = {k: v for k, v in env.items() if v or k not in case.env}
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True,
                              errors="replace", timeout=timeout, stdin=subprocess.DEVNULL)
        code, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = None
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    return Outcome(case, code, time.monotonic() - started, err)


TRAIN_RUN = ["training", "run", "--model", "unet3d", "--results-dir", "r"]
CKPT_RUN = ["checkpointing", "run", "--model", "llama3-8b", "--checkpoint-folder", "c",
            "--num-processes", "1", "--results-dir", "r"]


def front_door_cases() -> list[Case]:
    """mlpstorage's command lines that mean nothing here, or are wrong (docs/mlpstorage.md)."""
    refused = {"--exec-type": ["docker"], "--ssh-username": ["me"], "--loops": ["0"],
               "--object": [], "--config-file": ["x.yaml"], "--dlio-bin-path": ["/x"]}
    cases = [Case(f"mlpstorage {flag}", [*TRAIN_RUN, flag, *values], says=flag.split()[0])
             for flag, values in refused.items()]
    # honoured since issue Journeys (the launch options): the run goes on to its dataset,
    # which is not there
    honoured = {"--allow-run-as-root": [], "--oversubscribe": [], "--mpi-bin": ["mpirun"]}
    cases += [Case(f"mlpstorage {flag} (honoured)", [*TRAIN_RUN, flag, *values],
                   says="generating the dataset would write") for flag, values in honoured.items()]
    cases += [
        Case("mlpstorage --hosts without a rank count", [*TRAIN_RUN, "--hosts", "10.9.9.9"],
             says="--num-accelerators"),
        Case("mlpstorage 4 accelerators, one process", [*TRAIN_RUN, "--num-accelerators", "4"],
             says="mpiexec -n 4"),
        Case("mlpstorage unknown flag", [*TRAIN_RUN, "--frobnicate"], says="--frobnicate"),
        Case("mlpstorage unknown model", ["training", "run", "--model", "gpt9"], says="gpt9"),
        Case("mlpstorage no --model", ["training", "datagen"], says="--model"),
        Case("mlpstorage --param without =", [*TRAIN_RUN, "--param", "epochs"], says="epochs"),
        Case("mlpstorage unknown checkpoint model",
             ["checkpointing", "run", "--model", "llama9", "--checkpoint-folder", "c"],
             says="llama9"),
        Case("mlpstorage 8 checkpoint processes, one process", [*CKPT_RUN[:-4], "--num-processes",
             "8", "--results-dir", "r"], says="mpiexec -n 8"),
        Case("mlpstorage --results-dir ''", ["training", "run", "--model", "unet3d",
             "--results-dir", ""], says="output.folder"),
        Case("mlpstorage reportgen of an empty folder",
             ["reports", "reportgen", "--results-dir", "empty"], {"empty/.keep": b""},
             says="empty"),
    ]
    return cases


def main() -> int:
    """Run every case and print a table and the totals."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per case")
    parser.add_argument("--only", default="", help="run the cases whose name holds this")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    record = Recorder(__file__)
    every = key_cases() + file_cases() + cli_cases() + trace_cases() + s3_cases() + slurm_cases()
    every += kvcache_cases()
    cases = [c for c in every + damaged_cases() if args.only in c.name]
    tmp = Path(tempfile.mkdtemp(prefix="dliobench-bad-inputs-"))
    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(lambda ic: run_case(ic[1], tmp / f"case{ic[0]:03d}",
                                                         args.timeout), enumerate(cases)))
    finally:
        if args.keep:
            print(f"cases kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("| case | exit | s | problems | error (first line) |\n|---|---|---|---|---|")
    for o in outcomes:
        first = (o.error_lines or [""])[-1 if o.stderr.startswith("usage:") else 0]
        first = first.replace("|", "/")[:110]
        print(f"| {o.case.name} | {o.code} | {o.seconds:.1f} | {', '.join(o.flags()) or 'ok'} "
              f"| {first} |")
    totals = {flag: sum(flag in o.flags() for o in outcomes)
              for flag in ("traceback", "hang", "false-success", "code", "lines", "vague")}
    clean = sum(not o.flags() for o in outcomes)
    print(f"\n{len(outcomes)} cases: {clean} ended with the exit code expected and one error "
          "line; " + ", ".join(f"{k}: {v}" for k, v in totals.items()))
    rows = [{"case": o.case.name, "code": o.code, "seconds": o.seconds, "flags": o.flags()}
            for o in outcomes]
    summary = {"cases": len(outcomes), "clean": clean, **totals}
    print(f"- record: {record.write(summary, outcomes=rows)}")
    return 1 if totals["traceback"] or totals["hang"] or totals["false-success"] \
        or totals["vague"] else 0


if __name__ == "__main__":
    sys.exit(main())
