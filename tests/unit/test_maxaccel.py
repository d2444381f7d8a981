"""The max-accelerator search: doubling, then bisection, bounded, with every probe kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dliobench.report import maxaccel
from dliobench.report.sweep import PointOutcome, SweepSpec
from dliobench.run import preflight


def fake_storage(capacity: int, calls: list[int], limiter: str = "storage",
                 busy: float = 0.5, alone_bytes: float = 2e9):  # type: ignore[no-untyped-def]
    """A storage that sustains up to ``capacity`` ranks (AU 0.95, else 0.5, judged
    ``limiter``-limited); with compute 0 it reads 2 GB/s with its host ``busy``."""

    def run_point(spec, ranks, settings, folder, timeout=None):  # type: ignore[no-untyped-def]
        alone = settings.get("train.computation_time") == 0
        if alone:
            verdict = {"limiter": "not applicable", "reason": "compute 0",
                       "host_cpu_busy_share": busy, "host_cpu_busy_min": 0.9}
            metrics = {"au": None, "samples_per_s": 500.0 * ranks, "bytes_per_s": alone_bytes}
        else:
            calls.append(ranks)
            au = 0.95 if ranks <= capacity else 0.5
            verdict = {"limiter": "none" if au > 0.9 else limiter, "reason": f"AU {au:.0%}"}
            metrics = {"au": au, "samples_per_s": 10.0 * ranks, "bytes_per_s": 1e9}
        result = {"metrics": metrics, "config": {"metric": {"au": 0.9},
                                                 "reader": {"read_threads": 1}},
                  "verdict": verdict}
        return PointOutcome(f"r{ranks}", ranks, settings, run_dir="x", result=result)

    return run_point


@pytest.mark.parametrize(("capacity", "limit", "best", "probes"), [
    (5, 64, 5, [1, 2, 4, 8, 6, 5]),
    (64, 64, 64, [1, 2, 4, 8, 16, 32, 64]),
    (100, 48, 48, [1, 2, 4, 8, 16, 32, 48]),
    (40, 48, 40, [1, 2, 4, 8, 16, 32, 48, 40, 44, 42, 41]),
    (0, 64, None, [1]),
])
def test_search(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capacity: int, limit: int,
                best: int | None, probes: list[int]) -> None:
    calls: list[int] = []
    monkeypatch.setattr(maxaccel, "run_point", fake_storage(capacity, calls))
    spec = SweepSpec(name="t", workload=Path("w.yaml"), overrides=[], axes={},
                     output=tmp_path)
    search = maxaccel.find_max_accelerators(spec, "h100", limit)
    assert calls == probes
    assert (search.best.ranks if search.best else None) == best
    text = search.sentence("unet3d")
    summary = json.loads((search.folder / "sweep.json").read_text())["search"]
    if best is None:
        assert "cannot sustain even one h100" in text and "AU 50%" in text
    elif capacity >= limit:  # nothing failed: a lower bound, and the sentence says so
        assert f"sustains at least {best} h100" in text and "cap reached" in text
        assert summary["cap_reached"] is True and summary["first_failure"] is None
    else:
        assert f"sustains {best} h100" in text and f"at {best + 1} the run was " \
            "storage-limited" in text
        assert summary["cap_reached"] is False
        assert summary["first_failure"] == {"ranks": best + 1, "limiter": "storage",
                                            "reason": "AU 50%"}
    # the storage's own rate, compute 0, on the ranks sustained that fit the cores, always
    fit = preflight.ranks_that_fit(1)
    alone = summary["storage_alone"]
    assert alone["ranks"] == min(best or 1, fit) and alone["bytes_per_s"] == 2e9
    assert f"the storage alone, compute 0 on {alone['ranks']} rank(s): 2,000.0 MB/s" in text
    assert summary["stopped_by"] == ("cap" if best is not None and capacity >= limit
                                     else "storage")


def test_a_client_that_stops_the_count_is_named(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """At 3 ranks the run was client-limited (its host's CPUs busy): the answer is the
    client's count, the client is named as what stopped it, and the storage's own rate is
    given, a lower bound when its host's CPUs were busy too."""
    calls: list[int] = []
    monkeypatch.setattr(maxaccel, "run_point", fake_storage(2, calls, "client", busy=0.97))
    spec = SweepSpec(name="t", workload=Path("w.yaml"), overrides=[], axes={},
                     output=tmp_path)
    search = maxaccel.find_max_accelerators(spec, "h100", 8)
    assert calls == [1, 2, 4, 3] and search.stopped_by == "client"
    text = search.sentence("default")
    assert text.startswith("this client sustains 2 h100 accelerator(s) for default")
    assert "at 3 the client was the limit, not the storage (AU 50%)" in text
    assert "2,000.0 MB/s" in text and "a lower bound: the host's CPUs were 97% busy" in text
    summary = json.loads((search.folder / "sweep.json").read_text())["search"]
    assert summary["stopped_by"] == "client" and summary["best"] == 2
    assert summary["storage_alone"]["host_cpu_busy_share"] == 0.97


def test_a_storage_alone_rate_below_a_probes_is_a_lower_bound(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """Compute 0 on the ranks that fit the cores read less than the probes with compute did
    (seen here: 1 rank 1,357 MB/s, 5 ranks 1,693 MB/s): not the storage's limit, so the
    answer says it is a lower bound and names the faster probe's rate."""
    monkeypatch.setattr(maxaccel, "run_point", fake_storage(2, [], alone_bytes=0.5e9))
    spec = SweepSpec(name="t", workload=Path("w.yaml"), overrides=[], axes={},
                     output=tmp_path)
    text = maxaccel.find_max_accelerators(spec, "h100", 8).sentence("default")
    assert "compute 0 on" in text and "500.0 MB/s" in text
    assert "a lower bound: 1 rank(s) with compute delivered 1,000.0 MB/s" in text


def test_a_probe_that_errors_ends_the_search_as_an_error(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    """A probe that did not run (at 4 here, after 1 and 2 sustained) measured nothing: the
    search stops there and says so; it is not the first failure, nor a storage limit."""
    calls: list[int] = []
    storage = fake_storage(64, calls)

    def run_point(spec, ranks, settings, folder, timeout=None):  # type: ignore[no-untyped-def]
        if ranks == 4:
            calls.append(ranks)
            return PointOutcome("r4", 4, settings, error="timed out after 60 s")
        return storage(spec, ranks, settings, folder, timeout)

    monkeypatch.setattr(maxaccel, "run_point", run_point)
    spec = SweepSpec(name="t", workload=Path("w.yaml"), overrides=[], axes={},
                     output=tmp_path)
    search = maxaccel.find_max_accelerators(spec, "h100", 64)
    assert calls == [1, 2, 4]
    assert search.error is not None and search.first_failure is None
    assert not search.cap_reached
    assert search.sentence("unet3d") == (
        "the probe at 4 h100 accelerator(s) failed, so the search stopped with no storage "
        "result (2 sustained before it): timed out after 60 s")
    summary = json.loads((search.folder / "sweep.json").read_text())["search"]
    assert summary["error"] == {"ranks": 4, "reason": "timed out after 60 s"}
