"""The ``milvus`` engine against a real server: milvus-lite's gRPC server (tests/milvus_lite.py)
started once for the module; upstream's ``vectordb datagen|run`` command lines (mlcommons/storage
``mlpstorage_py/cli/vectordb_args.py``@041cfcf3, scaled down; the run in the division-first
form, its two query processes two ranks); the index read back from the server; each input
format; the sweep and its curves; and the faults: no server at start, the server killed
mid-run, a collection that is already there (``--force``), one of another dimension."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import last_result
from tests.milvus_lite import Server, free_port, start

pytest.importorskip("pymilvus", reason="the milvus extra (pymilvus) is not installed")
pytest.importorskip("milvus_lite", reason="the milvus extra (milvus-lite) is not installed")

SHAPE = ["--num-vectors", "1000", "--dimension", "32", "--num-query-vectors", "40"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One milvus-lite server for the module's tests."""
    running = start(tmp_path_factory.mktemp("milvus") / "data")
    yield running
    running.stop()


def _client(server: Server) -> Any:
    from pymilvus import MilvusClient

    return MilvusClient(uri=f"http://127.0.0.1:{server.port}", timeout=10)


def _datagen(run_cli: Callable[..., int], server: Server, index_dir: Path, *more: str) -> int:
    return int(run_cli("vectordb", "datagen", *server.flags, *SHAPE, "--index-dir",
                       str(index_dir), "--batch-size", "500", "--chunk-size", "1000", *more))


def _manifest(index_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(next(index_dir.glob("*/manifest.json")).read_text())
    return doc


def test_upstreams_lines_load_the_server_and_run_on_it(server: Server, workdir: Path,
                                                       run_cli: Callable[..., int]) -> None:
    assert run_cli("vectordb", "datagen", "-s", "127.0.0.1", "-p", str(server.port), *SHAPE,
                   "--index-dir", str(workdir / "idx"), "--batch-size", "500", "--chunk-size",
                   "1000", "--index-type", "HNSW", "--collection", "upstream_lines",
                   "--num-shards", "1", "--vector-dtype", "FLOAT_VECTOR", "--distribution",
                   "uniform", "--force") == 0  # upstream's short -s/-p
    doc = _manifest(workdir / "idx")
    described = _client(server).describe_index("upstream_lines", "vector")  # read back
    assert described["index_type"] == "HNSW" and described["indexed_rows"] == 1000
    assert doc["index_type"] == "hnsw" and doc["params"]["described_index"] == described
    assert doc["params"]["index_params"] == {"M": 16, "efConstruction": 200}
    assert run_cli("closed", "vectordb", "run", *server.flags, *SHAPE, "--index-dir",
                   str(workdir / "idx"), "--collection", "upstream_lines", "--distribution",
                   "uniform", "--num-query-processes", "2", "--batch-size", "2", "--runtime",
                   "0.3", "--search-ef", "64", "--search-limit", "10", "--results-dir",
                   str(workdir / "r")) == 0
    v = last_result(workdir / "r")["vectordb"]
    assert v["engine"] == "milvus" and v["index_type"] == "hnsw" and v["clients"] == 2
    assert v["valid"] and v["recall"] >= 0.9 and v["queries"] > 0
    assert v["verdict"]["limiter"] == "server memory/CPU"
    assert "not storage" in v["verdict"]["reason"]


def test_a_diskann_index_milvus_lite_does_not_build_is_reported_as_what_it_built(
        server: Server, workdir: Path, run_cli: Callable[..., int]) -> None:
    assert _datagen(run_cli, server, workdir / "idx", "--index-type", "DISKANN",
                    "--collection", "lite_diskann", "--force") == 0
    doc = _manifest(workdir / "idx")
    assert doc["params"]["described_index"]["index_type"] == "DISKANN"  # what it says
    assert doc["index_type"] == "flat" and doc["index_type_asked"] == "diskann"  # what it did


def test_no_server_at_start_is_one_sentence_and_leaves_nothing(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    port = str(free_port())
    assert run_cli("vectordb", "datagen", "--host", "127.0.0.1", "--port", port, *SHAPE,
                   "--index-dir", str(workdir / "idx")) != 0
    err = capsys.readouterr().err
    assert f"no Milvus server answers at 127.0.0.1:{port}" in err and "Traceback" not in err
    assert not (workdir / "idx").exists() or not any((workdir / "idx").iterdir())


def test_a_collection_that_is_there_needs_force(server: Server, workdir: Path,
                                                run_cli: Callable[..., int],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--index-type", "HNSW", "--collection", "taken")
    assert _datagen(run_cli, server, workdir / "a", *args, "--force") == 0
    assert _datagen(run_cli, server, workdir / "b", *args) != 0  # another index folder
    err = capsys.readouterr().err
    assert "collection taken already exists" in err and "--force" in err
    assert _datagen(run_cli, server, workdir / "b", *args, "--force") == 0


def test_a_collection_of_another_dimension_is_one_sentence(
        server: Server, workdir: Path, run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    from pymilvus import DataType, MilvusClient

    assert _datagen(run_cli, server, workdir / "idx", "--index-type", "HNSW", "--collection",
                    "redone", "--force") == 0
    client = _client(server)  # someone else recreates the collection with 16 dimensions
    client.drop_collection("redone")
    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=16)
    client.create_collection("redone", schema=schema)
    assert run_cli("vectordb", "run", *server.flags, *SHAPE, "--index-dir",
                   str(workdir / "idx"), "--collection", "redone", "--runtime", "0.2",
                   "--results-dir", str(workdir / "r")) != 0
    err = capsys.readouterr().err
    assert "vectors of dimension 16, the index in" in err and "32" in err


def test_the_server_killed_mid_run_keeps_what_was_measured(
        tmp_path: Path, workdir: Path, run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    dying = start(tmp_path / "dying")
    try:
        assert _datagen(run_cli, dying, workdir / "idx", "--index-type", "IVF_FLAT") == 0
        killer = threading.Timer(0.6, dying.stop)
        killer.start()
        code = run_cli("vectordb", "run", *dying.flags, *SHAPE, "--index-dir",
                       str(workdir / "idx"), "--runtime", "30", "--results-dir",
                       str(workdir / "r"))
        killer.join()
    finally:
        dying.stop()
    assert code != 0
    err = capsys.readouterr().err
    assert "stopped answering" in err and "status: partial" in err
    result = json.loads(next((workdir / "r").glob("*/result*.json")).read_text())
    assert result["status"] == "partial" and result["vectordb"]["queries"] > 0
    assert np.isfinite(result["vectordb"]["qps"])
    assert run_cli("vectordb", "run", *dying.flags, *SHAPE, "--index-dir",  # down at start
                   str(workdir / "idx"), "--runtime", "1") != 0
    assert f"no Milvus server answers at 127.0.0.1:{dying.port}" in capsys.readouterr().err


def test_an_ann_benchmarks_set_with_its_ground_truth(server: Server, workdir: Path,
                                                     run_cli: Callable[..., int]) -> None:
    from dliobench.run.vectordb.truth import exact
    from tests.unit.test_vectordb_inputs import write_vecs

    rng = np.random.default_rng(5)  # SIFT-like: raw uint8-range floats, L2, given truth
    base = (rng.random((1500, 16)) * 128).astype(np.float32)
    queries = (rng.random((30, 16)) * 128).astype(np.float32)
    write_vecs(workdir / "base.fvecs", base)
    write_vecs(workdir / "query.fvecs", queries)
    write_vecs(workdir / "gt.ivecs", exact(queries, [base], 20).ids.astype(np.int32))
    files = ["--distribution", "npy", "--vectors-file", str(workdir / "base.fvecs"),
             "--queries-file", str(workdir / "query.fvecs"), "--num-vectors", "1500",
             "--dimension", "16", "--num-query-vectors", "30", "--index-dir",
             str(workdir / "idx"), "--collection", "sift_like"]
    assert run_cli("vectordb", "datagen", "vectordb.metric_type=l2", *server.flags, *files,
                   "--truth-file", str(workdir / "gt.ivecs"), "--index-type", "IVF_FLAT",
                   "--force") == 0
    doc = _manifest(workdir / "idx")
    assert doc["truth"]["given"]["matched"] and doc["vectors"]["raw"]
    assert doc["index_type"] == "ivf_flat"
    assert run_cli("vectordb", "run", "vectordb.metric_type=l2", *server.flags, *files,
                   "--queries", "60", "--search-ef", "128", "--results-dir",
                   str(workdir / "r")) == 0
    assert last_result(workdir / "r")["vectordb"]["recall"] >= 0.9


def test_a_sweep_over_threads_and_ef_and_its_curves(server: Server, workdir: Path,
                                                    run_cli: Callable[..., int]) -> None:
    assert _datagen(run_cli, server, workdir / "idx", "--index-type", "HNSW", "--collection",
                    "swept", "--force") == 0
    assert run_cli("vectordb", "run", "vectordb.sweep_threads=1,2",
                   "vectordb.sweep_search_list=10,40", *server.flags, *SHAPE, "--index-dir",
                   str(workdir / "idx"), "--collection", "swept", "--benchmark-mode", "sweep",
                   "--runtime", "0.15", "--results-dir", str(workdir / "r")) == 0
    v = last_result(workdir / "r")["vectordb"]
    grid = [(p["threads_per_rank"], p["search_list"]) for p in v["sweep"]]
    assert grid == [(1, 10), (2, 10), (1, 40), (2, 40)]
    assert all(p["queries"] > 0 and p["p99_ms"] > 0 for p in v["sweep"])
    assert v["search_list"] == 40 and v["clients"] == 2  # the last point's, as its figures
    assert v["queries"] == v["sweep"][-1]["queries"]
    assert run_cli("report", str(workdir / "r"), "-o", str(workdir / "page")) == 0
    assert (workdir / "page" / "vectordb_concurrency.png").exists()
    assert (workdir / "page" / "vectordb_recall_curve.png").exists()

