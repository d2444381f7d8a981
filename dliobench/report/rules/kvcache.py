"""Checks of one KV-cache run against the MLPerf Storage v3.0 KV-cache submission options
(mlcommons/storage kv_cache_benchmark/README.md@0e06e6b6, "MLPerf Submission Guidelines"):
one of the three options' parameters, their 300 s at full entry size, reads that reached
storage, and three trials of a setup."""

from __future__ import annotations

import statistics
from typing import Any

from dliobench.report.rules.finding import KV_README, Finding, Rule, finding
from dliobench.report.rules.runset import complete
from dliobench.report.rules.subject import setup_text
from dliobench.report.runs import Run
from dliobench.results.storage_reads import read_origin

OPTIONS_RULE = Rule(KV_README, "MLPerf Submission Guidelines: Options 1-3")
PARAMETERS = Rule(KV_README, "Critical Parameters (Discovery-Validated)")
TRIALS = Rule(KV_README, "Trial Requirements")
# name: the keys each option fixes (README.md@0e06e6b6)
OPTIONS: dict[str, dict[str, Any]] = {
    "option 1 (8B, storage stress)": {
        "model": "llama3.1-8b", "num_users": 200, "cpu_mem_gb": 0,
        "max_concurrent_allocs": 16},
    "option 2 (8B, storage throughput)": {
        "model": "llama3.1-8b", "num_users": 100, "cpu_mem_gb": 4,
        "max_concurrent_allocs": 0},
    "option 3 (70B)": {"model": "llama3.1-70b-instruct", "num_users": 70, "cpu_mem_gb": 0,
                       "max_concurrent_allocs": 4},
}
COMMON = {"gpu_mem_gb": 0, "generation_mode": "none", "seed": 42}
MIN_DURATION_S = 300
MIN_TRIALS = 3


def is_kvcache(run: Run) -> bool:
    """Whether the run is a KV-cache run (the kvcache family)."""
    return "kvcache" in run.result


def _kv(run: Run) -> dict[str, Any]:
    return {k.removeprefix("kvcache."): v for k, v in run.flat.items()
            if k.startswith("kvcache.")}


def _differences(kv: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    return [f"{k} {kv.get(k)!r} (needs {v!r})" for k, v in {**wanted, **COMMON}.items()
            if kv.get(k) != v]


def check_option(run: Run, division: str) -> Finding:
    """The run's parameters are one of the three options' (the closest one is named)."""
    kv = _kv(run)
    name, wanted = min(OPTIONS.items(), key=lambda o: len(_differences(kv, o[1])))
    off = _differences(kv, wanted)
    said = (f"runs {name}" if not off else
            f"is not a v3.0 option; closest is {name}, but " + ", ".join(off))
    return finding("v3.0 option", not off, run.run_id, said, OPTIONS_RULE)


def check_length(run: Run, division: str) -> Finding:
    """Ran for the options' 300 s (not a request count), entries at full size."""
    kv = _kv(run)
    ok = (float(kv.get("duration", 0)) >= MIN_DURATION_S and not kv.get("max_requests")
          and kv.get("entry_scale") == 1)
    said = (f"ran {kv.get('duration')} s" + (f", stopped at {kv.get('max_requests')} requests"
                                              if kv.get("max_requests") else "")
            + ("" if kv.get("entry_scale") == 1 else
               f", entries scaled by {kv.get('entry_scale')}")
            + f"; the options run {MIN_DURATION_S} s at full size")
    return finding("duration", ok, run.run_id, said, PARAMETERS)


def check_reads_from_storage(run: Run, division: str) -> Finding:
    """Decode reads reached the storage tier, bypassing the page cache (O_DIRECT or an
    object store)."""
    storage = run.result["kvcache"]["tiers"]["storage"]
    origin = read_origin(run.result)  # the rule every output prints
    ok = origin.state == "storage"
    said = (f"{storage['read_bytes']:,} bytes read from the storage tier"
            + (f", {origin.how}" if ok else
               ", buffered: the page cache may have served them" if storage["read_bytes"]
               else ""))
    return finding("reads from storage", ok, run.run_id, said, PARAMETERS)


def check_trials(runs: list[Run], division: str) -> Finding:
    """Three complete trials of the setup; their spread (coefficient of variation of decode
    bytes read and tokens/s) is said."""
    done = complete(runs)
    cvs = []
    for key in ("decode_bytes_read_gb", "avg_throughput_tokens_per_sec"):
        values = [float(r.result["kvcache"]["cache_stats"][key] if key.startswith("decode")
                        else r.result["kvcache"][key]) for r in done]
        if len(values) >= 2 and statistics.mean(values):
            cvs.append(f"{key} CV {statistics.stdev(values) / statistics.mean(values):.1%}")
    return finding("trials", len(done) >= MIN_TRIALS, setup_text(runs[0].setup()),
                   f"{len(done)} complete trial(s); v3.0 takes {MIN_TRIALS}"
                   + (f" ({', '.join(cvs)})" if cvs else ""), TRIALS)
