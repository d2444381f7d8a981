"""Odd file systems and damaged inputs: does every case end in one sentence, the right exit
code, no traceback and no hang?

Sets up each case in a temporary folder (real FIFOs, directories, symlink loops, dangling
symlinks, regular files where folders belong, damaged or vanishing data files, damaged
manifests) and runs the real CLI as a subprocess with a timeout. Counts per case: exit code,
traceback ("Traceback" on stderr), hang (timeout), false success (exit 0 where the case must
fail). Exits 1 on any traceback, hang or false success.

    .venv/bin/python -m benchmarks.faults.odd_filesystems [-k SUBSTRING] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness.records import Recorder

LOADERS = ("native", "pytorch", "dali")
REPO = Path(__file__).resolve().parents[2]
# the cases run in their own folders: the CLI is this checkout's
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
FAIL, OK, EITHER = "fail", "ok", "either"  # what the case must end in


@dataclass
class Case:
    """One setup and the command run on it."""

    name: str
    command: list[str]  # after `dliobench`; {w} is the workload file, {d} the case folder
    setup: Callable[[Path], None] = lambda d: None
    expect: str = FAIL
    code: int | None = None  # the exit code wanted (None: any non-zero for FAIL)
    during: Callable[[Path], None] | None = None  # done to the data while the command runs
    overrides: dict[str, Any] = field(default_factory=dict)


def workload(folder: Path, fmt: str = "npz", **sections: dict[str, Any]) -> dict[str, Any]:
    """A tiny workload whose folders are all inside ``folder``."""
    doc: dict[str, Any] = {
        "model": {"name": "odd", "model_size_bytes": 4096},
        "dataset": {"data_folder": str(folder / "data"), "format": fmt, "num_files_train": 6,
                    "num_samples_per_file": 2 if fmt == "indexed_binary" else 1,
                    "record_length_bytes": 32768},
        "reader": {"batch_size": 2, "read_threads": 2, "prefetch_size": 2},
        "train": {"epochs": 1, "computation_time": 0.0},
        "output": {"folder": str(folder / "reports")},
        "checkpoint": {"checkpoint_folder": str(folder / "ckpt")},
    }
    for name, values in sections.items():
        doc.setdefault(name, {}).update(values)
    return doc


def data_file(d: Path, index: int = 2, suffix: str = "") -> Path:
    """A data file of the case's dataset (or its side file ``suffix``)."""
    files = sorted(p for p in (d / "data/train").rglob("*") if p.suffix != ".idx"
                   and not p.name.startswith("."))
    return Path(str(files[index]) + suffix)


def replace_with(kind: str, suffix: str = "") -> Callable[[Path], None]:
    """Replace a data (or side) file by a FIFO, a folder, a symlink loop or a dangling link."""
    def setup(d: Path) -> None:
        path = data_file(d, suffix=suffix)
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            path.mkdir()
        elif kind == "loop":
            os.symlink(path.name, path)
        elif kind == "dangling":
            os.symlink(path.name + ".gone", path)
        elif kind == "deleted":
            pass
    return setup


def zero_bytes(d: Path) -> None:
    """Damage a data file without changing its size (the stat check cannot see it)."""
    path = data_file(d)
    with open(path, "r+b") as handle:
        handle.write(bytes(256))


def under_file(sub: str = "x") -> Callable[[Path], str]:
    """A path under a regular file (the override of a folder key)."""
    def over(d: Path) -> str:
        (d / "plain").write_text("a regular file")
        return str(d / "plain" / sub)
    return over


def manifest_json(d: Path) -> Path:
    return d / "data/dliobench-manifest/manifest.json"


def edit_manifest(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        path = manifest_json(d)
        doc = json.loads(path.read_text())
        path.write_text(json.dumps(change(doc)))
    return setup


def set_field(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    def change(doc: dict[str, Any]) -> Any:
        doc[key] = value
        return doc
    return change


def swap_during(kind: str, suffix: str = "") -> Callable[[Path], None]:
    """While the run reads (its reports folder exists): damage a data (or side) file."""
    def act(d: Path) -> None:
        path = data_file(d, index=0, suffix=suffix)
        if kind == "delete":
            path.unlink()
        elif kind == "truncate":
            os.truncate(path, 100)
        elif kind == "fifo":
            path.unlink()
            os.mkfifo(path)
    return act


def manifest_cases() -> list[Case]:
    run = ["run", "{w}", "--no-progress"]
    folder = "data/dliobench-manifest"

    def as_file(d: Path) -> None:
        shutil.rmtree(d / folder)
        (d / folder).write_text("x")

    def json_dir(d: Path) -> None:
        manifest_json(d).unlink()
        manifest_json(d).mkdir()

    def json_fifo(d: Path) -> None:
        manifest_json(d).unlink()
        os.mkfifo(manifest_json(d))

    def json_loop(d: Path) -> None:
        manifest_json(d).unlink()
        os.symlink("manifest.json", manifest_json(d))

    def garbage(d: Path) -> None:
        manifest_json(d).write_text("{not json")

    return [
        Case("manifest folder is a file", run, as_file, code=1),
        Case("manifest.json is a folder", run, json_dir, code=1),
        Case("manifest.json is a FIFO", run, json_fifo, code=1),
        Case("manifest.json is a symlink loop", run, json_loop, code=1),
        Case("manifest.json is not JSON", run, garbage, code=1),
        Case("manifest.json is a list", run, edit_manifest(lambda doc: [doc]), code=1),
        Case("manifest num_files is a string", run,
             edit_manifest(set_field("num_files", "x")), code=1),
        Case("manifest num_files is a list", run,
             edit_manifest(set_field("num_files", [1])), code=1),
        Case("manifest params is a list", run, edit_manifest(set_field("params", [1])),
             code=1),
        Case("manifest journals is a string", run, edit_manifest(set_field("journals", "x")),
             code=1),
        Case("manifest manifest.json is a FIFO, generate --verify",
             ["generate", "{w}", "--no-progress", "--verify"], json_fifo, code=1),
    ]


def path_cases() -> list[Case]:
    run = ["run", "{w}", "--no-progress"]
    cases = [Case(f"{key} under a regular file", run, overrides={key: under_file()},
                  code=2)
             for key in ("dataset.data_folder", "output.folder", "storage.stage_to",
                         "checkpoint.checkpoint_folder")]
    cases[-1].overrides["workflow.checkpoint"] = lambda d: True
    cases.append(Case("dataset.data_folder under a file, generate",
                      ["generate", "{w}", "--no-progress"],
                      overrides={"dataset.data_folder": under_file()},
                      code=2))

    def is_file(key: str) -> Callable[[Path], Any]:
        def over(d: Path) -> str:
            (d / "plain").write_text("a regular file")
            return str(d / "plain")
        return over

    for key in ("dataset.data_folder", "output.folder", "checkpoint.checkpoint_folder"):
        case = Case(f"{key} is a regular file", run, overrides={key: is_file(key)}, code=2)
        if key.startswith("checkpoint"):
            case.overrides["workflow.checkpoint"] = lambda d: True
        cases.append(case)

    def train_file(d: Path) -> None:
        shutil.rmtree(d / "data")
        (d / "data").mkdir()
        (d / "data/train").write_text("x")

    cases.append(Case("data_folder/train is a regular file", run, train_file, code=2))

    def train_loop(d: Path) -> None:
        shutil.rmtree(d / "data/train")
        os.symlink("train", d / "data/train")

    def data_loop(d: Path) -> str:
        os.symlink("loop", d / "loop")
        return str(d / "loop")

    cases.append(Case("data_folder/train is a symlink loop", run, train_loop, code=2))
    cases.append(Case("dataset.data_folder is a symlink loop", run, code=2,
                      overrides={"dataset.data_folder": data_loop}))
    return cases


def data_cases() -> list[Case]:
    cases = []
    verify = ["generate", "{w}", "--no-progress", "--verify"]
    for kind in ("fifo", "dir", "loop", "dangling"):
        cases.append(Case(f"data file is a {kind}: generate --verify", verify,
                          replace_with(kind), expect=EITHER))
        cases.append(Case(f"data file is a {kind}: run, no generation",
                          ["run", "{w}", "--no-progress", "workflow.generate_data=false"],
                          replace_with(kind), code=1))
        cases.append(Case(f"index side file is a {kind}: run, no generation",
                          ["run", "{w}", "--no-progress", "workflow.generate_data=false"],
                          replace_with(kind, ".off.idx"), code=1,
                          overrides={"dataset.format": lambda d: "indexed_binary"}))
    cases.append(Case("data file is a fifo: run (regenerates)", ["run", "{w}", "--no-progress"],
                      replace_with("fifo"), expect=EITHER))
    for loader in LOADERS:
        over = {"reader.data_loader": lambda d, loader=loader: loader}
        cases.append(Case(f"{loader}: damaged bytes, same size", ["run", "{w}", "--no-progress"],
                          zero_bytes, code=1, overrides=over))
        for kind in ("delete", "truncate", "fifo"):
            slow = {**over, "train.epochs": lambda d: 400,
                    "train.computation_time": lambda d: 0.002}
            cases.append(Case(f"{loader}: data file {kind}d during the run" if kind != "fifo"
                              else f"{loader}: data file swapped for a FIFO during the run",
                              ["run", "{w}", "--no-progress"], code=1, overrides=slow,
                              during=swap_during(kind)))
    cases += [
        Case("dali own reader: damaged bytes, same size", ["run", "{w}", "--no-progress"],
             zero_bytes, code=1, overrides=_dali_native()),
        Case("dali own reader: data file deleted during the run",
             ["run", "{w}", "--no-progress"], code=1, during=swap_during("delete"),
             overrides={**_dali_native(), "train.epochs": lambda d: 400,
                        "train.computation_time": lambda d: 0.002}),
        Case("hdf5 (h5py reads): data file deleted during the run",
             ["run", "{w}", "--no-progress"], code=1, during=swap_during("delete"),
             overrides={"dataset.format": lambda d: "hdf5", "train.epochs": lambda d: 400,
                        "train.computation_time": lambda d: 0.002}),
    ]
    for loader in LOADERS:
        # a reader that has the file's index already needs no side file (EITHER); one that
        # has not must say which is missing
        cases.append(Case(f"{loader}: index side file deleted during the run",
                          ["run", "{w}", "--no-progress"], expect=EITHER,
                          during=swap_during("delete", ".off.idx"),
                          overrides={"reader.data_loader": lambda d, loader=loader: loader,
                                     "dataset.format": lambda d: "indexed_binary",
                                     "train.epochs": lambda d: 400,
                                     "train.computation_time": lambda d: 0.002}))
    return cases


def _dali_native() -> dict[str, Callable[[Path], Any]]:
    return {"dataset.format": lambda d: "npy", "reader.data_loader": lambda d: "dali",
            "reader.dali_native_reader": lambda d: True}


def report_cases() -> list[Case]:
    def one_run(d: Path) -> None:
        (d / "plain").write_text("a regular file")

    return [
        Case("report -o under a regular file", ["report", "{d}/reports", "-o", "{d}/plain/x"],
             one_run, code=2),
        Case("report --trace -o under a regular file",
             ["report", "{d}/reports", "--trace", "-o", "{d}/plain/x"], one_run, code=2),
        Case("report: result.json is a FIFO", ["report", "{d}/reports"],
             lambda d: _replace_in_run(d, "result.json", "fifo")),
        Case("report: result.json is a folder", ["report", "{d}/reports"],
             lambda d: _replace_in_run(d, "result.json", "dir")),
        Case("report: result.json is a symlink loop", ["report", "{d}/reports"],
             lambda d: _replace_in_run(d, "result.json", "loop")),
        Case("report: timeline.csv is a FIFO", ["report", "{d}/reports"],
             lambda d: _replace_in_run(d, "timeline.csv", "fifo"), expect=EITHER),
        Case("report --trace: timeline.csv is a FIFO", ["report", "{d}/reports", "--trace"],
             lambda d: _replace_in_run(d, "timeline.csv", "fifo"), expect=EITHER),
        Case("report --trace: timeline.csv is a folder", ["report", "{d}/reports", "--trace"],
             lambda d: _replace_in_run(d, "timeline.csv", "dir"), expect=EITHER),
        Case("report of a missing folder", ["report", "{d}/nowhere"]),
        Case("report of a regular file", ["report", "{d}/plain"], one_run),
    ]


def _replace_in_run(d: Path, name: str, kind: str) -> None:
    """Replace a file of the case's finished run by a FIFO, a folder or a symlink loop."""
    path = next((d / "reports").glob(f"*/{name}"))
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    else:
        os.symlink(path.name, path)


def workload_cases() -> list[Case]:
    """The workload file itself is odd."""
    def odd(kind: str) -> Callable[[Path], None]:
        def setup(d: Path) -> None:
            (d / "w.yaml").unlink()
            if kind == "fifo":
                os.mkfifo(d / "w.yaml")
            elif kind == "dir":
                (d / "w.yaml").mkdir()
            else:
                os.symlink("w.yaml", d / "w.yaml")
        return setup

    return [Case(f"workload file is a {kind}", ["run", "{w}", "--no-progress"], odd(kind),
                 code=2) for kind in ("fifo", "dir", "loop")]


def cases() -> list[Case]:
    return (manifest_cases() + path_cases() + data_cases() + report_cases()
            + workload_cases())


def prepare_case(case: Case, base: dict[str, Path], root: Path) -> tuple[Path, Path]:
    """A case folder with a copy of the base dataset (and a finished run for report cases)."""
    d = Path(tempfile.mkdtemp(dir=root))
    over = {k: f(d) for k, f in case.overrides.items()}
    fmt = over.get("dataset.format", "npz")
    shutil.copytree(base[fmt] / "data", d / "data", symlinks=True)
    shutil.copytree(base[fmt] / "reports", d / "reports", symlinks=True)
    doc = workload(d, fmt)
    for key, value in over.items():
        section, name = key.split(".", 1)
        doc.setdefault(section, {})[name] = value
    path = d / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    case.setup(d)
    return d, path


def run_case(case: Case, d: Path, path: Path, timeout: float) -> dict[str, Any]:
    argv = [a.replace("{w}", str(path)).replace("{d}", str(d)) for a in case.command]
    cmd = [sys.executable, "-m", "dliobench", *argv]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=d, start_new_session=True, env=ENV)
    if case.during is not None:
        threading.Thread(target=_act_when_running, args=(case.during, d, proc),
                         daemon=True).start()
    try:
        _, err = proc.communicate(timeout=timeout)
        hang = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        _, err = proc.communicate()
        hang = True
    code = proc.returncode
    errors = [line for line in err.splitlines() if line.startswith("dliobench: error")]
    bad_code = case.expect == FAIL and case.code is not None and code != case.code
    return {"case": case.name, "code": code, "hang": hang, "traceback": "Traceback" in err,
            "false_success": case.expect == FAIL and code == 0, "bad_code": bad_code,
            "seconds": time.monotonic() - t0, "message": errors[-1] if errors else
            (err.strip().splitlines() or [""])[-1]}


def _act_when_running(act: Callable[[Path], None], d: Path, proc: subprocess.Popen[str]) -> None:
    runs = d / "reports"
    before = set(runs.iterdir()) if runs.exists() else set()
    while proc.poll() is None:
        if runs.exists() and set(runs.iterdir()) - before:
            time.sleep(0.3)
            act(d)
            return
        time.sleep(0.02)


def base_datasets(root: Path) -> dict[str, Path]:
    """One generated dataset and one finished run per format the cases use."""
    out = {}
    for fmt in ("npz", "indexed_binary", "npy", "hdf5"):
        d = root / f"base-{fmt}"
        d.mkdir()
        path = d / "w.yaml"
        path.write_text(yaml.safe_dump(workload(d, fmt)))
        subprocess.run([sys.executable, "-m", "dliobench", "run", str(path), "--no-progress"],
                       check=True, capture_output=True, cwd=d, env=ENV)
        out[fmt] = d
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only cases whose name contains this")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    record = Recorder(__file__)
    root = Path(tempfile.mkdtemp(prefix="dliobench-odd-"))
    rows = []
    try:
        base = base_datasets(root)
        for case in cases():
            if args.k.lower() not in case.name.lower():
                continue
            d, path = prepare_case(case, base, root)
            row = run_case(case, d, path, args.timeout)
            rows.append(row)
            flags = [k for k in ("traceback", "hang", "false_success", "bad_code") if row[k]]
            print(f"{row['case'][:52]:52} exit {row['code']!s:>4} {row['seconds']:5.1f}s "
                  f"{','.join(flags) or 'ok':14} {row['message'][:150]}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    totals = {k: sum(bool(r[k]) for r in rows)
              for k in ("traceback", "hang", "false_success", "bad_code")}
    print(f"\n{len(rows)} cases: {totals['traceback']} traceback(s), {totals['hang']} hang(s), "
          f"{totals['false_success']} false success(es), {totals['bad_code']} unexpected exit "
          f"code(s)")
    print(f"- record: {record.write({'cases': len(rows), **totals}, outcomes=rows)}")
    return 1 if totals["traceback"] or totals["hang"] or totals["false_success"] else 0


if __name__ == "__main__":
    sys.exit(main())
