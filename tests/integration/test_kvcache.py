"""``dliobench kvcache`` end to end: the three v3.0 options scaled down on POSIX (upstream's
option names, its metric names in result.json, bytes counted at the storage), ShareGPT
replay, S3 on moto's server, and a bad option as one sentence."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import S3Server, last_result

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"
SHAREGPT = Path(__file__).resolve().parents[1] / "data" / "sharegpt_small.json"
SMALL = ["--num-users", "12", "--max-requests", "12", "--entry-scale", "0.002"]
UPSTREAM_NAMES = ("total_requests", "total_tokens", "elapsed_time", "total_storage_io_time",
                  "avg_throughput_tokens_per_sec", "storage_throughput_tokens_per_sec",
                  "requests_per_second", "end_to_end_latency_ms", "storage_io_latency_ms",
                  "generation_latency_ms", "cache_stats", "multi_turn_stats", "qos_metrics")


@pytest.mark.parametrize("option", ["kvcache_8b_200u", "kvcache_8b_100u_cpu4",
                                    "kvcache_70b_70u"])
def test_v3_options_scaled_down(option: str, workdir: Path, run_cli: Callable[..., int],
                                capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli("kvcache", str(WORKLOADS / f"{option}.yaml"), "--max-requests", "40",
                   "--entry-scale", "0.002",
                   "--cache-dir", str(workdir / "tier"))
    assert code == 0
    result = last_result(workdir / "reports")
    kv = result["kvcache"]
    assert all(name in kv for name in UPSTREAM_NAMES)
    assert kv["total_requests"] == 40 and kv["total_tokens"] > 0
    assert 0 < kv["end_to_end_latency_ms"]["mean"] <= kv["end_to_end_latency_ms"]["max"]
    stats, storage = kv["cache_stats"], kv["tiers"]["storage"]
    assert stats["decode_bytes_read_gb"] > 0 and storage["write_bytes"] > 0
    if option.endswith("cpu4"):  # 4 GiB x 0.002: the CPU tier fills, LRU entries go down
        assert kv["tiers"]["cpu"]["reads"] > 0 and kv["tiers"]["cpu"]["write_bytes"] > 0
    else:  # no CPU tier: every entry is a file, every decode read reads one
        assert kv["tiers"]["cpu"]["writes"] == 0 and stats["storage_read_p95_ms"] > 0
        assert storage["read_bytes"] >= stats["decode_bytes_read_gb"] * 1e9
    assert result["config"]["kvcache"]["seed"] == 42 and result["verdict"]["limiter"]
    perf = kv["storage_performance"]  # upstream's latency profile's criteria
    assert perf["overall_status"] in ("PASS", "FAIL") and perf["total_count"] >= 3
    qos = kv["qos_metrics"]  # upstream's targets (models.py@64f05b37), judged per class
    assert sum(q["total_requests"] for q in qos.values()) == 40
    assert all(q["sla"]["target_latency_p95_ms"] in (50, 100, 1000) for q in qos.values())
    assert not list((workdir / "tier").iterdir())  # the entries are deleted
    assert "KV cache" in capsys.readouterr().out
    run_cli("check", "--json", str(workdir / "reports" / result["run_id"]))
    status = {f["check"]: f["status"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert status["v3.0 option"] == "pass"
    assert status["reads from storage"] == "pass"
    assert status["duration"] == "fail" and status["trials"] == "fail"  # scaled, one trial


def test_sharegpt_replay_same_schedule_and_plots(workdir: Path,
                                                 run_cli: Callable[..., int]) -> None:
    args = ("kvcache", "--model", "tiny-1b", "--dataset-path", str(SHAREGPT),
            "--generation-mode", "none", "--gpu-mem-gb", "0", "--cpu-mem-gb", "0", *SMALL,
            "--output", "upstream.json")  # upstream's --output: a results file
    assert run_cli(*args) == 0
    first = last_result(workdir / "reports")["kvcache"]
    upstream = json.loads((workdir / "upstream.json").read_text())  # upstream's shape, as
    assert upstream.pop("run_dir") and upstream == json.loads(  # summary.json's
        next((workdir / "reports").glob("*/summary.json")).read_text())
    _upstream_summary_matches(upstream, first)
    assert first["replayed"] and first["total_requests"] == 12
    assert run_cli(*args) == 0
    again = last_result(workdir / "reports")["kvcache"]
    assert again["cache_stats"]["decode_bytes_read_gb"] == \
        first["cache_stats"]["decode_bytes_read_gb"]
    assert again["total_tokens"] == first["total_tokens"]
    from dliobench.report.plots.kvcache import kvcache_plots  # the report's figures
    from dliobench.report.runs import load_runs
    from dliobench.report.tables import run_set

    plots = kvcache_plots(run_set(load_runs([workdir / "reports"])), workdir)
    assert [p.name for p in plots] == ["kvcache_latency", "kvcache_users", "kvcache_tokens"]
    assert all(p.path is not None and p.path.stat().st_size > 0 for p in plots)


def test_kvcache_on_s3(workdir: Path, run_cli: Callable[..., int], s3_env: S3Server) -> None:
    bucket = s3_env.bucket("kvcache")
    code = run_cli("kvcache", *s3_env.overrides(), "--model", "tiny-1b", "--gpu-mem-gb", "0",
                   "--cpu-mem-gb", "0", "--generation-mode", "none", *SMALL,
                   "--cache-dir", f"s3://{bucket}/kv")
    assert code == 0
    kv = last_result(workdir / "reports")["kvcache"]
    assert kv["tiers"]["storage"]["reads"] > 0 and kv["tiers"]["storage"]["write_bytes"] > 0
    assert s3_env.client().list_objects_v2(Bucket=bucket, Prefix="kv")["KeyCount"] == 0


def test_a_bad_option_is_one_sentence(workdir: Path, run_cli: Callable[..., int],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("kvcache", "--model", "gpt-5", "--max-requests", "2") == 2
    err = capsys.readouterr().err
    assert "kvcache.model" in err and "Traceback" not in err
    assert run_cli("kvcache", "--tensor-parallel", "2", "--max-requests", "2") == 2
    assert "kvcache.tensor_parallel (2) cannot exceed" in capsys.readouterr().err


def test_a_full_storage_tier_stops_the_run_at_once(workdir: Path, run_cli: Callable[..., int],
                                                   mount: Callable[..., Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A 6 MiB tmpfs given a capacity it lacks (10.7 MB at this scale) fills after a few
    entries: one sentence naming the tier, long before the 200 requests, what was served
    kept as a partial result, the tier's files deleted. (Without the capacity, 90 % of the
    free space is the tier's and its LRU entries are deleted instead.)"""
    disk = mount("tmpfs", "size=6M")
    code = run_cli("kvcache", "--model", "tiny-1b", "--num-users", "20", "--max-requests",
                   "200", "--io-depth", "1", "--entry-scale", "0.01", "--gpu-mem-gb", "0",
                   "--cpu-mem-gb", "0", "--generation-mode", "none", "--cache-dir", str(disk),
                   "--storage-capacity-gb", "1")
    assert code == 1
    err = capsys.readouterr().err
    assert f"storage tier {disk} failed during the run: No space left" in err, err
    assert "(status: partial)" in err
    partial = last_result(workdir / "reports")
    assert partial["status"] == "partial" and 0 < partial["kvcache"]["total_requests"] < 200
    assert "No space left" in partial["errors"][0]
    assert not list(disk.iterdir())


def _upstream_summary_matches(doc: dict[str, Any], kv: dict[str, Any]) -> None:
    """summary.json is upstream's --output results file (kv_cache/cli.py@23aa82ed,
    benchmark.py@0eeb5228), its figures result.json's ``kvcache`` ones under upstream's
    names; mlpstorage's aggregation reads three of them (mlpstorage_py/benchmarks/
    kvcache.py@01333b68). main wrote DLIO's training summary here (num_files_train...)."""
    assert "num_files_train" not in doc and doc["requests_completed"] == kv["total_requests"]
    assert doc["total_tokens_generated"] == kv["total_tokens"] and doc["seed"] == 42
    summary = doc["summary"]
    assert set(UPSTREAM_NAMES) <= set(summary)
    for name in ("total_requests", "total_tokens", "elapsed_time",
                 "avg_throughput_tokens_per_sec", "requests_per_second"):
        assert summary[name] == kv[name], name
    stats = summary["cache_stats"]
    assert stats["tier_storage_read_bandwidth_gbps"] == \
        kv["cache_stats"]["tier_storage_read_bandwidth_gbps"] > 0
    assert stats["storage_entries"] == kv["cache_stats"]["storage_entries"] > 0
    assert summary["storage_io_latency_ms"]["p95"] == kv["storage_io_latency_ms"]["p95"]
    assert stats["storage_health"] == kv["storage_performance"]
    assert summary["multi_turn_stats"]["cache_hits"] == kv["multi_turn_stats"]["hits"]
    assert doc["multi_turn_cache_misses"] == kv["multi_turn_stats"]["misses"]
