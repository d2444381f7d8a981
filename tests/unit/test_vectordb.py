"""The vector-database benchmark's parts on a real, tiny DiskANN index (built once per
session: ``vdb_index``): vectors that make recall mean something, ground truth against an
independent brute force, recall of a whole run checked against it, the invalid-recall
verdict in the result and in ``check``, and the index's faults, one sentence each."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import DlioBenchError, InputError
from dliobench.config.vectordb_keys import VectorDBConfig
from dliobench.results.figures import VECTORDB
from dliobench.run.vectordb import manifest, truth, vectors
from dliobench.run.vectordb.sizes import Shape, disk_index_bytes, upstream_estimate
from tests.conftest import last_result
from tests.vdb_index import keys


def _nn_contrast(draw: vectors.Draw) -> float:
    """Median distance to the nearest vector over the median distance to any: near 1, every
    vector is about as far as any other and recall@k tells nothing."""
    rows = next(vectors.chunks(draw))
    q = vectors.queries(draw, 50)
    d = np.sqrt(np.maximum(2 - 2 * q @ rows.T, 0))
    return float(np.median(d.min(axis=1)) / np.median(d))


def test_clustered_vectors_are_seeded_unit_and_have_near_neighbours() -> None:
    clustered = vectors.Draw("clustered", 2000, 128, seed=7, clusters=16, spread=0.35)
    a, b = next(vectors.chunks(clustered)), next(vectors.chunks(clustered))
    assert np.array_equal(a, b) and np.allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    uniform = vectors.Draw("uniform", 2000, 128, seed=7)  # upstream's (issue #625)
    assert _nn_contrast(clustered) < 0.5 < 0.8 < _nn_contrast(uniform)


def test_ground_truth_matches_an_independent_brute_force() -> None:
    rng = np.random.default_rng(3)
    base = vectors.normalize(rng.standard_normal((700, 16)).astype(np.float32))
    q = vectors.normalize(rng.standard_normal((20, 16)).astype(np.float32))
    got = truth.exact(q, (base[i:i + 64] for i in range(0, 700, 64)), 5)  # chunks of 64
    expected = np.argsort(((q[:, None, :] - base[None]) ** 2).sum(-1), axis=1)[:, :5]
    assert np.array_equal(got.ids, expected)
    truth.check(got, q, base, 5, "here")  # its own index: no complaint


@pytest.mark.parametrize(("spoil", "said"), [
    (lambda t: truth.Truth(t.ids[:0], t.distances[:0]), "is empty"),
    (lambda t: truth.Truth(t.ids[:-1], t.distances[:-1]), "has shape"),
    (lambda t: truth.Truth(t.ids + 10_000, t.distances), "names vector"),
    (lambda t: truth.Truth(t.ids[:, ::-1].copy(), t.distances), "does not match"),
])
def test_a_ground_truth_that_does_not_fit_is_one_sentence(spoil, said) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(4)
    base = vectors.normalize(rng.standard_normal((300, 8)).astype(np.float32))
    q = vectors.normalize(rng.standard_normal((10, 8)).astype(np.float32))
    good = truth.exact(q, [base], 4)
    with pytest.raises(InputError, match=said):
        truth.check(spoil(good), q, base, 4, "here")


def test_datasize_is_upstreams_arithmetic_and_our_files() -> None:
    # upstream's README example: 10M x 1536, DISKANN, 10 shards -> 798.72 GB
    assert upstream_estimate(10_000_000, 1536, "DISKANN", 10) == 798_720_000_000
    # 5,000 x 64 at degree 32: 388-byte nodes, 10 to a sector, a header sector
    assert disk_index_bytes(Shape(5000, 64, 32, 64, 100, 10)) == 4096 * 501


def _run(run_cli, index_dir: Path, *extra: str) -> int:  # type: ignore[no-untyped-def]
    return run_cli("vectordb", "run", *keys(index_dir), *extra)  # type: ignore[no-any-return]


def test_a_run_reports_recall_an_independent_search_agrees_with(
        vdb_index: Path, workdir: Path, run_cli,  # type: ignore[no-untyped-def]
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # no figure wrapped across lines
    assert _run(run_cli, vdb_index, "--queries", "100", "--search-ef", "40",
                "--results-dir", str(workdir / "r")) == 0
    result = last_result(workdir / "r")
    console = capsys.readouterr().out
    v = result["vectordb"]
    assert v["queries"] == 100 and v["mode"] == "query_count" and v["valid"]
    assert v["index"]["vectors"]["distribution"] == "clustered"
    assert v["index"]["vectors"]["clusters"] == 64 and v["index"]["vectors"]["spread"] == 0.35
    # each query once: the run's recall is this search's, against our own brute force
    from dliobench.run.vectordb.engines import engine_for

    cfg = VectorDBConfig(index_dir=str(vdb_index), num_vectors=3000, dimension=32,
                         num_query_vectors=100, search_list=40)
    index = manifest.load(cfg)
    base = np.asarray(vectors.read_file(index.folder / manifest.VECTORS))
    exact = np.argsort(((index.queries[:, None] - base[None]) ** 2).sum(-1), axis=1)[:, :10]
    found = engine_for("diskann").open(index.folder, cfg, workdir / "log").search(
        index.queries, 10).ids
    mine = np.mean([len(set(f) & set(e)) / 10 for f, e in zip(found, exact, strict=True)])
    assert v["recall"] == pytest.approx(mine) and mine > 0.9
    assert v["reads_per_query"]["index"] > 1 and v["latency_ms"]["p999"] > 0
    assert v["verdict"]["limiter"] in ("storage", "client CPU", "index")
    summary = json.loads((workdir / "r" / result["run_id"] / "summary.json").read_text())
    assert summary["throughput_qps"] == v["qps"] and summary["recall"] == v["recall"]
    assert summary["p99_latency_ms"] == v["latency_ms"]["p99"]
    for fig in VECTORDB:  # one figure, one value: the console, result.json, summary.json
        assert fig.text(result).strip() in console, fig.name
        for out in fig.outputs:
            doc = result if out.file == "result.json" else summary
            for part in out.path.split("."):
                doc = doc[part]
            assert doc == fig.value(result), fig.name


def test_low_recall_makes_the_run_invalid_in_its_result_and_in_check(
        vdb_index: Path, workdir: Path, run_cli,  # type: ignore[no-untyped-def]
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(run_cli, vdb_index, "--queries", "50", "--search-ef", "10",
                "--min-recall", "1.0", "--results-dir", str(workdir / "r")) == 0
    result = last_result(workdir / "r")
    v = result["vectordb"]
    assert v["recall"] < 1.0 and not v["valid"] and "below vectordb.min_recall" in \
        v["invalid_reason"]
    assert "INVALID" in capsys.readouterr().out
    run_cli("check", "--json", str(workdir / "r" / result["run_id"]))
    found = {f["check"]: f["status"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert found["recall"] == "fail" and found["runtime"] == "fail"  # 50 queries, not 30 s
    assert found["index type"] == "pass" and found["runs"] == "fail"
    folder = workdir / "r" / result["run_id"]  # an OPEN index type: IVF_FLAT
    doc = json.loads((folder / "result.json").read_text())
    doc["vectordb"]["index_type"] = "ivf_flat"
    (folder / "result.json").write_text(json.dumps(doc))
    for division, status in (("closed", "fail"), ("open", "pass")):
        run_cli("check", "--json", "--division", division, str(folder))
        found = {f["check"]: f["status"] for f in json.loads(capsys.readouterr().out)["findings"]}
        assert found["index type"] == status, division


def _copy(vdb_index: Path, tmp_path: Path) -> Path:
    shutil.copytree(vdb_index, tmp_path / "idx")
    return tmp_path / "idx"


def test_a_missing_index_is_one_sentence(workdir: Path, run_cli,  # type: ignore[no-untyped-def]
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(run_cli, workdir / "nothing", "--runtime", "1") == 2
    assert "there is no index in" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["truncated", "overwritten", "truth", "manifest"])
def test_a_damaged_index_is_one_sentence(damage: str, vdb_index: Path, tmp_path: Path) -> None:
    root = _copy(vdb_index, tmp_path)
    cfg = VectorDBConfig(index_dir=str(root), num_vectors=3000, dimension=32,
                         num_query_vectors=100)
    folder = manifest.folder_of(cfg)
    disk = folder / "index" / "ann_disk.index"
    if damage == "truncated":
        disk.write_bytes(disk.read_bytes()[:4096])
        said = "is damaged: index/ann_disk.index has"
    elif damage == "overwritten":  # same size, header gone: DiskANN itself refuses it
        disk.write_bytes(b"\xff" * disk.stat().st_size)
        said = "DiskANN cannot open the index"
    elif damage == "truth":  # another index's truth: the manifest's SHA-256 says so
        ids = np.load(folder / manifest.TRUTH_IDS)
        np.save(folder / manifest.TRUTH_IDS, ids[::-1].copy())
        said = "the ground truth in .* does not match the index"
    else:
        (folder / manifest.NAME).write_text("{not json")
        said = "cannot be read"
    from dliobench.run.vectordb.engines import engine_for

    with pytest.raises(InputError, match=said):
        index = manifest.load(cfg)
        engine_for("diskann").open(index.folder, cfg, tmp_path / "log")


def test_a_full_disk_during_the_build_leaves_nothing_that_looks_whole(
        mount, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("diskannpy")
    from dliobench.run.vectordb.build import datagen

    small = mount("tmpfs", "size=600k")  # the vectors fit (384 KB), the index does not
    cfg = VectorDBConfig(index_dir=str(small), num_vectors=3000, dimension=32,
                         num_query_vectors=10, max_degree=24, search_list_size=48)
    with pytest.raises(DlioBenchError, match="filled up while building the index"):
        datagen(cfg)
    assert list(small.iterdir()) == []


def test_an_object_store_folder_is_refused(run_cli, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli("vectordb", "datagen", "--index-dir", "s3://bucket/idx") == 2
    assert "POSIX reads only" in capsys.readouterr().err


def test_the_users_own_vectors_are_indexed(tmp_path: Path) -> None:
    pytest.importorskip("diskannpy")
    from dliobench.run.vectordb.build import datagen

    rng = np.random.default_rng(5)
    np.save(tmp_path / "mine.npy", rng.standard_normal((600, 16)).astype(np.float32))
    cfg = VectorDBConfig(index_dir=str(tmp_path / "idx"), distribution="npy",
                         vectors_file=str(tmp_path / "mine.npy"), num_vectors=10_000,
                         dimension=16, num_query_vectors=20, max_degree=16,
                         search_list_size=32)
    doc = datagen(cfg).doc
    assert doc["vectors"]["count"] == 600 and doc["vectors"]["source"].endswith("mine.npy")
    assert len(manifest.load(cfg).queries) == 20  # a run with the same keys finds it
    with pytest.raises(InputError, match=r"has 16 dimensions, vectordb\.dimension is 32"):
        datagen(VectorDBConfig(index_dir=str(tmp_path / "idx"), distribution="npy",
                               vectors_file=str(tmp_path / "mine.npy"), dimension=32,
                               force=True))


def test_an_index_diskann_refuses_leaves_no_run_folder(
        vdb_index: Path, tmp_path: Path, run_cli,  # type: ignore[no-untyped-def]
        capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(vdb_index, tmp_path)
    disk = next(root.glob("*/index/ann_disk.index"))
    disk.write_bytes(b"\xff" * disk.stat().st_size)
    assert _run(run_cli, root, "--runtime", "1", "--results-dir", str(tmp_path / "r")) == 2
    assert "DiskANN cannot open the index" in capsys.readouterr().err
    assert not list((tmp_path / "r").glob("*"))


def test_what_a_killed_build_left_is_removed_by_the_next(tmp_path: Path) -> None:
    pytest.importorskip("diskannpy")
    import subprocess

    from dliobench.run.vectordb.build import datagen

    cfg = VectorDBConfig(index_dir=str(tmp_path), num_vectors=500, dimension=8,
                         num_query_vectors=10, max_degree=8, search_list_size=16)
    dead = subprocess.Popen(["true"])  # a process that has ended: no build of its is going on
    dead.wait()
    name = manifest.folder_of(cfg).name
    for left in (f".building-{name}-{dead.pid}", f".old-{name}-{dead.pid}"):
        (tmp_path / left).mkdir()
        (tmp_path / left / "vectors.bin").write_bytes(b"half")
    assert datagen(cfg).built
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
