"""A JSON record of each benchmark run, and the tables read back from them.

Every timing script ends with ``Recorder.write``: one file
``benchmarks/records/<date>-<commit>-<script>.json`` holding the command, the commit of the tree
measured (and whether it had uncommitted changes), the machine, the load average at the start and
at the end, and the results: per contender its repetitions and their min/median/max (lists of
numbers), or whatever else the script measured. ``python -m benchmarks.harness.records`` prints
the medians of the latest record of each script; ``--compare A B`` sets two commits' records of
the same script side by side (A's median over B's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.harness.machine import REPO, command, commit_of, machine_facts
from benchmarks.harness.timing import Spread

RECORDS = REPO / "benchmarks" / "records"


def _plain(value: Any) -> Any:
    """JSON-ready: a list of numbers carries its spread; mappings keyed by tuples get str keys."""
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else " / ".join(map(str, k)) if isinstance(k, tuple)
                else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            s = Spread.of(value)
            return {"values": list(value), "min": s.low, "median": s.median, "max": s.high}
        return [_plain(v) for v in value]
    if isinstance(value, Spread):
        return {"min": value.low, "median": value.median, "max": value.high, "n": value.n}
    if isinstance(value, Path):
        return str(value)
    return value


class Recorder:
    """Opened when a script starts (the load then), written when it ends."""

    def __init__(self, script: str, src: str | Path | None = None,
                 folder: Path | None = None) -> None:
        self.script = Path(script).stem
        self.src = Path(src) if src else REPO
        self.folder = folder or RECORDS
        self.command = command()
        self.started = dt.datetime.now(dt.timezone.utc)
        self.load_start = [round(x, 2) for x in os.getloadavg()]

    def record(self, results: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
        """The record as written: command, commit, machine, load, results."""
        commit, dirty = commit_of(self.src)
        return {"script": self.script, "command": self.command,
                "started": self.started.isoformat(timespec="seconds"),
                "ended": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "tree": str(self.src), "commit": commit, "dirty": dirty,
                "machine": machine_facts(),
                "load": {"start": self.load_start, "end": [round(x, 2) for x in os.getloadavg()]},
                "results": _plain(results), **_plain(extra)}

    def write(self, results: Mapping[str, Any], **extra: Any) -> Path:
        """Write the record and return its path (a new file: an earlier one is never replaced)."""
        doc = self.record(results, **extra)
        self.folder.mkdir(parents=True, exist_ok=True)
        stem = f"{self.started:%Y-%m-%d}-{doc['commit'][:7] or 'nocommit'}-{self.script}"
        path, n = self.folder / f"{stem}.json", 1
        while path.exists():
            n += 1
            path = self.folder / f"{stem}-{n}.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
        return path


def load_records(folder: Path = RECORDS, script: str | None = None) -> list[dict[str, Any]]:
    """Every record in ``folder`` (of ``script`` only, when given), oldest first."""
    docs = []
    for path in folder.glob("*.json"):
        try:
            doc = json.loads(path.read_text())
            written = path.stat().st_mtime_ns
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and (script is None or doc.get("script") == script):
            docs.append((str(doc.get("started", "")), written, doc))
    return [doc for _, _, doc in sorted(docs, key=lambda d: d[:2])]


def medians(doc: Mapping[str, Any]) -> dict[str, float]:
    """Each result that has a median, by its name."""
    return {name: float(v["median"]) for name, v in doc.get("results", {}).items()
            if isinstance(v, Mapping) and "median" in v}


def table(doc: Mapping[str, Any]) -> list[str]:
    """Markdown: one record's medians and ranges, with its commit, date and load."""
    load = doc.get("load", {})
    lines = [f"### {doc['script']} at {doc['commit'][:7]} ({doc['started']}), load "
             f"{load.get('start', ['?'])[0]} -> {load.get('end', ['?'])[0]}", "",
             f"`{' '.join(doc['command'])}`", "", "| result | median | min-max |", "|---|---|---|"]
    for name, v in doc.get("results", {}).items():
        if isinstance(v, Mapping) and "median" in v:
            lines.append(f"| {name} | {v['median']:,.4g} | {v['min']:,.4g}-{v['max']:,.4g} |")
    return lines


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Markdown: the results two records share, A's median over B's."""
    ma, mb = medians(a), medians(b)
    lines = [f"### {a['script']}: {a['commit'][:7]} against {b['commit'][:7]}", "",
             "| result | A median | B median | A / B |", "|---|---|---|---|"]
    for name in ma.keys() & mb.keys():
        ratio = f"{ma[name] / mb[name]:.3f}" if mb[name] else "-"
        lines.append(f"| {name} | {ma[name]:,.4g} | {mb[name]:,.4g} | {ratio} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", type=Path, default=RECORDS)
    ap.add_argument("--script", help="only this script's records (its file name, no .py)")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"),
                    help="two commits (prefixes): their latest records of each script")
    args = ap.parse_args(argv)
    docs = load_records(args.folder, args.script)
    if not docs:
        print(f"No benchmark records in {args.folder}; a timing script writes one per run.",
              file=sys.stderr)
        return 1
    newest: dict[str, dict[str, Any]] = {}
    by_commit: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:  # oldest first: the latest wins
        newest[doc["script"]] = by_commit[doc["script"], doc["commit"]] = doc
    for script in sorted(newest):
        if not args.compare:
            print("\n".join(table(newest[script])), end="\n\n")
            continue
        a, b = ([d for (s, c), d in by_commit.items() if s == script and c.startswith(p)]
                for p in args.compare)
        if a and b:
            print("\n".join(compare(a[-1], b[-1])), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
