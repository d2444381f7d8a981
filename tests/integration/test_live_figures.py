"""What a run shows while it runs (issue "Face"): the live figures of training read from its
piped output, checked against the result it writes; `keys SECTION`; a sweep's dry-run
command pasted back into a shell."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import last_result, tiny_workload

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
EPOCH_LINE = re.compile(r"^epoch (\d+)/(\d+): (?:AU ([\d.]+) %, )?([\d,.]+) samples/s, "
                        r"([\d,.]+) MB/s$", re.M)
SO_FAR = re.compile(r"^training .+?: \d+/\d+ steps in [\d.]+ s; so far (?:AU ([\d.]+) %, )?"
                    r"([\d,.]+) samples/s, ([\d,.]+) MB/s$", re.M)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_piped_progress_lines_carry_the_results_figures(
        workdir: Path, write_workload: Callable[..., Path]) -> None:
    """A real run piped to a reader (a log file): a line per epoch (AU, samples/s, MB/s) and
    a last progress line whose figures are result.json's, within 20 %; the summary gives the
    AU's spread over epochs."""
    path = write_workload(tiny_workload(dataset={"num_files_train": 16},
                                        train={"epochs": 2, "computation_time": 0.01}))
    done = subprocess.run([sys.executable, "-m", "dliobench", "run", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=workdir)
    assert done.returncode == 0, done.stderr
    result = last_result(workdir / "reports")
    epochs = EPOCH_LINE.findall(done.stdout)
    assert [(int(e), int(n)) for e, n, *_ in epochs] == [(1, 2), (2, 2)], done.stdout
    for (_, _, au, rate, mb), shown in zip(epochs, result["epochs"], strict=True):
        assert _number(mb) == pytest.approx(shown["bytes_per_s"] / 1e6, rel=0.2)
        assert _number(rate) == pytest.approx(shown["samples_per_s"], rel=0.2)
        assert _number(au) == pytest.approx(100 * shown["au"], rel=0.2)
    last = SO_FAR.findall(done.stdout)[-1]
    assert _number(last[2]) == pytest.approx(result["metrics"]["bytes_per_s"] / 1e6, rel=0.2)
    assert _number(last[0]) == pytest.approx(100 * result["metrics"]["au"], rel=0.2)
    assert re.search(r"accelerator utilization\s+│ [\d.]+ % ± [\d.]+ over 2 epochs", done.stdout)


def test_progress_bar_at_compute_zero_gives_rates_and_no_au(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal's bar (rich draws its last state when the output is captured) and the
    epoch lines above it: at compute 0 AU means nothing, so they give samples/s and MB/s,
    the bar's last ones the result's."""
    from dliobench.dataset import progress

    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    path = write_workload(tiny_workload())
    assert run_cli("run", str(path)) == 0
    out = capsys.readouterr().out
    lines = EPOCH_LINE.findall(out)
    assert len(lines) == 2 and all(au == "" and _number(mb) > 0 for *_, au, _, mb in lines)
    bar = re.findall(r"^training tiny \S+ +8/8 ([\d,.]+) samples/s, ([\d,.]+) MB/s ", out, re.M)
    assert bar, out
    metrics = last_result(workdir / "reports")["metrics"]
    assert _number(bar[-1][1]) == pytest.approx(metrics["bytes_per_s"] / 1e6, rel=0.2)
    assert "AU 0.0" not in out and not SO_FAR.search(out)  # the bar, not the piped lines


def test_keys_of_one_section(capsys: pytest.CaptureFixture[str],
                             run_cli: Callable[..., int]) -> None:
    """`dliobench keys reader` lists the reader's keys only; an unknown section is one
    sentence naming the sections (exit 2)."""
    assert run_cli("keys", "reader") == 0
    names = re.findall(r"^(\S+) = ", capsys.readouterr().out, re.M)
    assert "reader.batch_size" in names and all(n.startswith("reader.") for n in names)
    assert run_cli("keys", "readr") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'readr'" in err and "reader, storage, train" in err


def test_dry_run_command_pastes_back_whole(capsys: pytest.CaptureFixture[str],
                                           run_cli: Callable[..., int]) -> None:
    """The dry run's command is shell-quoted: a label with spaces comes back one word."""
    assert run_cli("sweep", str(CONFIGS / "layout_comparison.yaml"), "--dry-run") == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("first command: "))
    argv = shlex.split(line.removeprefix("first command: "))
    assert "output.label=file per sample" in argv


def test_piped_output_gets_periodic_lines(write_workload: Callable[..., Path],
                                          run_cli: Callable[..., int],
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped, a long run says its figures so far every ``PLAIN_EVERY_S`` (here shortened),
    not only at its end; so does a bar (generation's bytes and rate, in MB for MBs)."""
    from dliobench.dataset import progress

    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.05)
    path = write_workload(tiny_workload(train={"epochs": 1, "computation_time": 0.1}))
    assert run_cli("run", str(path)) == 0
    steps = [int(n) for n in re.findall(r"^training \S+: (\d+)/4 steps", capsys.readouterr().out,
                                        re.M)]
    assert len(steps) >= 2 and steps[0] < 4 and steps[-1] == 4, steps
    with progress.bar("writing", 4e6, True, unit="bytes") as advance:
        for _ in range(4):
            time.sleep(0.05)
            advance(1e6)
    lines = re.findall(r"^writing .*/4.00 MB [\d.]+ [kMG]B/s", capsys.readouterr().out, re.M)
    assert len(lines) >= 2, lines  # at least one before the one rich draws at the end
