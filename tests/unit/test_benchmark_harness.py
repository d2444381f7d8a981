"""The benchmarks' shared harness: contenders take turns, spreads, and the JSON records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import records
from benchmarks.harness.records import Recorder, load_records
from benchmarks.harness.timing import Spread, interleave, spreads

REPO = Path(__file__).resolve().parents[2]


def test_contenders_take_turns_and_the_order_rotates() -> None:
    order: list[str] = []
    got = interleave({n: (lambda n=n: order.append(n) or len(order)) for n in "abc"}, 3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert got == {"a": [1, 6, 8], "b": [2, 4, 9], "c": [3, 5, 7]}
    assert interleave({"x": lambda: 1, "y": lambda: 2}, 2, rotate=False) == {"x": [1, 1],
                                                                             "y": [2, 2]}


def test_a_spread_is_min_median_max() -> None:
    assert spreads({"a": [3.0, 1.0, 2.0]})["a"] == Spread(1.0, 2.0, 3.0, 3)
    assert Spread.of([1.0, 2.0]).cell(".1f") == "1.5 (1.0-2.0)"


def test_a_record_holds_command_commit_machine_load_and_results(tmp_path: Path) -> None:
    rec = Recorder("benchmarks/compare/ab.py", src=REPO, folder=tmp_path)
    first = rec.write({("native", "main"): [10.0, 12.0, 11.0], "note": "x"}, shape="small")
    second = rec.write({("native", "main"): [20.0]})
    assert first != second and first.name.endswith("-ab.json")  # never replaced
    doc = json.loads(first.read_text())
    assert doc["script"] == "ab" and len(doc["commit"]) == 40 and doc["shape"] == "small"
    assert doc["machine"]["cpus"] and len(doc["load"]["start"]) == 3
    assert doc["results"]["native / main"] == {"values": [10.0, 12.0, 11.0], "min": 10.0,
                                               "median": 11.0, "max": 12.0}
    assert [d["results"]["native / main"]["median"] for d in load_records(tmp_path)] == [11, 20]
    assert records.main(["--folder", str(tmp_path)]) == 0


def test_two_commits_compared(tmp_path: Path, capsys: object) -> None:
    for commit, values in (("aaaa", [2.0]), ("bbbb", [1.0])):
        doc = {"script": "ab", "commit": commit, "started": commit, "command": ["python"],
               "results": {"native": {"values": values, "min": values[0],
                                      "median": values[0], "max": values[0]}}}
        (tmp_path / f"{commit}.json").write_text(json.dumps(doc))
    out = subprocess.run([sys.executable, "-m", "benchmarks.harness.records", "--folder",
                          str(tmp_path), "--compare", "aa", "bb"], cwd=REPO, text=True,
                         capture_output=True, check=True).stdout
    assert "| native | 2 | 1 | 2.000 |" in out
    empty = subprocess.run([sys.executable, "-m", "benchmarks.harness.records", "--folder",
                            str(tmp_path / "none")], cwd=REPO, text=True, capture_output=True)
    assert empty.returncode == 1 and empty.stderr.count("\n") == 1
