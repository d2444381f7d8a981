"""Sweeps: run a workload over a grid of settings and rank counts, then report.

A sweep file names a workload, fixed overrides and axes; every combination is one point, run
as its own ``dliobench run`` process (through the MPI launcher when it has more than one
rank), so a failing point is reported and the sweep goes on.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dliobench.base.errors import ConfigError, DlioBenchError
from dliobench.config.schema import Config
from dliobench.config.secrets import REDACTED, is_secret, redact_argv
from dliobench.report.pointrun import run_streaming
from dliobench.results.files import read_result, write_json
from dliobench.results.schema import RunResult

log = logging.getLogger(__name__)
DEFAULT_LAUNCHER = "mpiexec -n {ranks}"


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep file."""

    name: str
    workload: Path
    overrides: list[str]
    axes: dict[str, list[Any]]
    launcher: str = DEFAULT_LAUNCHER
    output: Path = Path("reports/sweeps")
    labels: dict[str, list[str]] = field(default_factory=dict)  # axis -> a label per value


@dataclass
class PointOutcome:
    """What one point of a sweep produced."""

    name: str
    ranks: int
    settings: dict[str, Any]
    run_dir: str | None = None
    error: str | None = None
    result: RunResult | None = field(default=None, repr=False)
    seconds: float | None = None  # how long the point ran (when it did)


def load_sweep(path: Path) -> SweepSpec:
    """Read and check a sweep file."""
    from dliobench.config import yamlfile

    doc = yamlfile.read(path, "sweep file")
    if not isinstance(doc, dict):
        raise ConfigError(f"sweep file {path} must be a YAML mapping with the keys workload, "
                          "overrides, axes, labels, launcher, output, name")
    unknown = set(doc) - {"name", "workload", "overrides", "axes", "launcher", "output",
                          "labels"}
    if unknown or "workload" not in doc:
        raise ConfigError(f"sweep file {path}: expected keys workload, overrides, axes, labels, "
                          f"launcher, output, name (unknown: "
                          f"{', '.join(sorted(map(str, unknown))) or '-'})")
    axes = doc.get("axes") or {}
    if not isinstance(axes, dict) or not all(isinstance(k, str) and isinstance(v, list) and v
                                             for k, v in axes.items()):
        raise ConfigError(f"sweep file {path}: axes must map keys to non-empty lists")
    _check_fields(path, doc, axes)
    workload = _resolve(path, doc["workload"])
    for axis, values in axes.items():  # workloads may be an axis too
        names = [n.strip() for n in axis.split(",")]
        if "workload" in names:
            at = names.index("workload")
            axes[axis] = [_resolve(path, v) if len(names) == 1 else
                          [*v[:at], _resolve(path, v[at]), *v[at + 1:]] for v in values]
    labels = doc.get("labels") or {}
    for axis, names in labels.items():
        if axis not in axes or not isinstance(names, list) or len(names) != len(axes[axis]):
            raise ConfigError(f"sweep file {path}: labels of '{axis}' must be a list with one "
                              "label per value of that axis")
    return SweepSpec(name=str(doc.get("name") or path.stem), workload=workload,
                     overrides=[str(o) for o in doc.get("overrides") or []], axes=axes,
                     launcher=str(doc.get("launcher") or DEFAULT_LAUNCHER),
                     output=Path(doc.get("output") or "reports/sweeps"),
                     labels={k: [str(n) for n in v] for k, v in labels.items()})


def _check_fields(path: Path, doc: dict[str, Any], axes: dict[Any, list[Any]]) -> None:
    """Refuse sweep-file values of the wrong kind: every point would fail the same way."""
    if not isinstance(doc.get("overrides") or [], list):
        raise ConfigError(f"sweep file {path}: overrides must be a list of section.key=value")
    if not isinstance(doc.get("labels") or {}, dict):
        raise ConfigError(f"sweep file {path}: labels must map axes to lists of labels")
    for name in ("workload", "launcher", "output", "name"):
        value = doc.get(name)
        if name in doc and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"sweep file {path}: {name} must be a non-empty string")
    ranks = axes.get("ranks", [1])
    if not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in ranks):
        raise ConfigError(f"sweep file {path}: axes.ranks must list positive whole numbers "
                          f"of ranks, not {ranks!r}")


def _resolve(sweep_file: Path, workload: Any) -> Path:
    """A workload path as written, or relative to the repository root (configs/..), or the
    name of a shipped workload (``default``, ``unet3d``), as ``dliobench run`` takes it."""
    path = Path(str(workload))
    if path.is_absolute() or path.exists():
        return path
    beside = sweep_file.parent.parent / path
    if beside.exists() or path.suffix in (".yaml", ".yml"):
        return beside
    from dliobench.config.shipped import workload_path

    return workload_path(str(workload))


def with_overrides(spec: SweepSpec, overrides: list[str]) -> SweepSpec:
    """``spec`` with command-line overrides added for every point.

    An override of a key that an axis sets would lose to the axis on every point without a
    word, so it is an error.
    """
    from dliobench.config.load import parse_overrides

    axis_items = [f"{name.strip()}=0" for axis in spec.axes for name in axis.split(",")
                  if name.strip() not in ("ranks", "workload")]  # not config keys
    axis_keys = set(parse_overrides(axis_items).values)
    clash = sorted(set(parse_overrides(overrides).values) & axis_keys)
    if clash:
        raise ConfigError(
            f"{', '.join(clash)} is set by an axis of the sweep, which would override the "
            "command line on every point; remove it from the command line or from the axes "
            "(to move every point's data to another file system, set storage.storage_root)")
    return replace(spec, overrides=[*spec.overrides, *overrides])


def points(spec: SweepSpec) -> list[tuple[int, dict[str, Any]]]:
    """Every (ranks, {key: value}) combination of the axes; ``ranks`` defaults to 1.

    An axis named ``a,b`` varies keys together: each of its values is a list [a, b].
    """
    keys = [k for k in spec.axes if k != "ranks"]
    out = []
    for ranks in spec.axes.get("ranks", [1]):
        for picks in itertools.product(*(range(len(spec.axes[k])) for k in keys)):
            values = [spec.axes[k][i] for k, i in zip(keys, picks, strict=True)]
            settings: dict[str, Any] = {}
            labels = [spec.labels[k][i] for k, i in zip(keys, picks, strict=True)
                      if k in spec.labels]
            for axis, value in zip(keys, values, strict=True):
                names = [n.strip() for n in axis.split(",")]
                if len(names) == 1:
                    settings[axis] = value
                elif isinstance(value, list) and len(value) == len(names):
                    settings.update(zip(names, value, strict=True))
                else:
                    raise ConfigError(f"axis '{axis}': each value must list {len(names)} "
                                      f"values, got {value!r}")
            if labels:  # the sweep file's names for this point, shown by reports
                settings["output.label"] = " / ".join(labels)
            out.append((int(ranks), settings))
    return out


def check_points(spec: SweepSpec) -> list[tuple[int, dict[str, Any], Any]]:
    """Every point with its resolved configuration, or ConfigError naming the first point
    whose settings do not load: nothing runs before all of them are known to."""
    from dliobench.config.load import load

    out = []
    for ranks, settings in points(spec):
        workload = settings.get("workload", spec.workload)
        keys = [f"{k}={v}" for k, v in settings.items() if k != "workload"]
        try:
            config, _ = load(Path(str(workload)), [*spec.overrides, *keys])
        except ConfigError as exc:
            raise ConfigError(f"point {point_name(ranks, settings)}: {exc}") from None
        out.append((ranks, settings, config))
    return out


def lacking(config: Config) -> str | None:
    """What this machine lacks to run a point of ``config`` (its loader's or its format's
    library does not import: the one sentence saying how to install it), or None. The
    modules are imported as the run would import them, so a broken install shows too."""
    from dliobench.formats import format_for
    from dliobench.loaders import REGISTRY

    try:
        importlib.import_module(REGISTRY[config.reader.data_loader])
        format_for(config.dataset, config.reader.decoder)
    except DlioBenchError as exc:
        return str(exc)
    except ImportError as exc:  # a library that imports but breaks underneath
        return f"{config.reader.data_loader} or {config.dataset.format} does not load ({exc})"
    return None


def point_name(ranks: int, settings: dict[str, Any]) -> str:
    """A folder-safe name of a point, e.g. ``r4-reader.data_loader=pytorch``."""
    parts = [f"r{ranks}", *(Path(str(v)).stem if k == "workload" else f"{k}={v}"
                            for k, v in settings.items() if k != "output.label")]
    return "-".join(redact_argv(parts)).replace("/", "_").replace(" ", "")


def _shown_axes(axes: dict[str, Any]) -> dict[str, Any]:
    """The sweep's axes with the values of a secret key (an axis of credentials) redacted."""
    return {k: [REDACTED] * len(v) if is_secret(k) else v for k, v in axes.items()}


def shown_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A point's settings as files and the console may show them: secrets redacted."""
    return {k: REDACTED if is_secret(k) else v for k, v in settings.items()}


def command(spec: SweepSpec, ranks: int, settings: dict[str, Any], out: Path) -> list[str]:
    """The argv of one point: the launcher for ranks > 1, then ``dliobench run``."""
    workload = settings.get("workload", spec.workload)
    keys = (f"{k}={v}" for k, v in settings.items() if k != "workload")
    run = [sys.executable, "-m", "dliobench", "run", str(workload), *spec.overrides, *keys,
           "--output", str(out), "--yes"]  # points run unattended; piped, a point's progress
    # is plain lines (``results.live``), which the sweep passes on
    if ranks == 1:
        return run
    launcher = shlex.split(spec.launcher.format(ranks=ranks))
    torchrun = Path(launcher[0]).name == "torchrun"
    if torchrun and len(launcher) == 1:  # `launcher: torchrun`: one node, this many ranks
        launcher += ["--standalone", f"--nproc-per-node={ranks}"]
    local = Path(sys.executable).parent / launcher[0]
    if local.exists():  # the venv's own mpiexec (the mpich wheel) or torchrun first
        launcher[0] = str(local)
    elif shutil.which(launcher[0]) is None:
        raise ConfigError(f"launcher '{launcher[0]}' not found; install the mpi extra or set "
                          "`launcher:` in the sweep file (e.g. 'srun -n {ranks}' or torchrun)")
    if torchrun:  # torchrun starts the Python module itself: `-m dliobench run ...`
        return [*launcher, *run[1:]]
    return [*launcher, *run]


def run_point(spec: SweepSpec, ranks: int, settings: dict[str, Any], folder: Path,
              timeout: float | None = None,
              on_line: Callable[[str], None] | None = None) -> PointOutcome:
    """Run one point; its run lands in ``folder/<point name>/<run-id>``. ``on_line`` hears
    the point's progress lines (each epoch's figures, the figures so far) as they come."""
    name = point_name(ranks, settings)
    out = folder / name
    outcome = PointOutcome(name, ranks, settings)
    started = time.monotonic()
    ended = run_streaming(command(spec, ranks, settings, out), timeout, on_line)
    if ended is None:
        outcome.error = f"timed out after {timeout:.0f} s"
        return outcome
    code, stderr = ended
    runs = sorted(p for p in out.glob("*/result.json")) if out.exists() else []
    if code != 0 or not runs:
        lines = [ln for ln in stderr.strip().splitlines() if "error" in ln.lower()]
        line = lines[-1].removeprefix("dliobench: error: ") if lines else None
        outcome.error = (line or stderr.strip()[-300:]) or f"exit code {code}"
        return outcome
    outcome.run_dir = str(runs[-1].parent)
    outcome.result = read_result(runs[-1].parent)
    outcome.seconds = time.monotonic() - started
    return outcome


def save_summary(folder: Path, spec: SweepSpec, outcomes: list[PointOutcome],
                 extra: dict[str, Any] | None = None) -> Path:
    """Write ``sweep.json``: the spec and every point's run folder or error."""
    doc = {"name": spec.name, "workload": str(spec.workload),
           "overrides": redact_argv(spec.overrides), "axes": _shown_axes(spec.axes),
           "points": [
               {"name": o.name, "ranks": o.ranks, "settings": shown_settings(o.settings),
                "run_dir": o.run_dir, "error": o.error,
                "au": o.result["metrics"]["au"] if o.result else None} for o in outcomes]}
    doc.update(extra or {})
    path = folder / "sweep.json"
    write_json(path, doc)
    return path


def sweep_folder(spec: SweepSpec) -> Path:
    """A fresh folder for this sweep's runs."""
    folder = spec.output / f"{time.strftime('%Y%m%d-%H%M%S')}-{spec.name}"
    folder.mkdir(parents=True, exist_ok=False)
    return folder


PointSaid = Callable[[int, int, str, "PointOutcome | str | None"], None]


def _hear(said: PointSaid | None, n: int, of: int, label: str) -> Callable[[str], None] | None:
    """What passes point n's progress lines on to ``said``."""
    return None if said is None else lambda line: said(n, of, label, line)


def run_sweep(spec: SweepSpec, timeout: float | None = None,
              said: PointSaid | None = None) -> tuple[Path, list[PointOutcome]]:
    """Run every point (failures are recorded, not fatal) and write sweep.json; every point's
    settings are checked first. ``said(n, of, label, what)`` hears of point n of ``of``
    (its ``output.label``, else its name) as it starts (``what`` None), each progress line
    it prints (a str) and how it ended (its ``PointOutcome``)."""
    checked = check_points(spec)
    folder = sweep_folder(spec)
    outcomes = []
    for n, (ranks, settings, _) in enumerate(checked, 1):
        label = str(settings.get("output.label") or point_name(ranks, settings))
        if said:
            said(n, len(checked), label, None)
        outcome = run_point(spec, ranks, settings, folder, timeout,
                            _hear(said, n, len(checked), label))
        if said:
            said(n, len(checked), label, outcome)
        if outcome.error:
            log.warning("%s failed: %s", outcome.name, outcome.error)
        outcomes.append(outcome)
        save_summary(folder, spec, outcomes)
    return folder, outcomes
