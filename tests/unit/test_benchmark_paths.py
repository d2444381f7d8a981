"""What the code, docs and tests cite of benchmarks/ exists: every `benchmarks/` path and
`python -m benchmarks.…` module, every "RESULTS.md, <section>" (words of one of that file's
headings; RESULTS.md's own goal rows name a heading exactly, its history references words of
the history's), every benchmark script imports without running, and no import cycle runs
through benchmarks/."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
RESULTS = BENCH / "RESULTS.md"
HISTORY = BENCH / "history"  # kept as written: its citations are of their day
PATH = re.compile(r"(?<![\w/.-])benchmarks/[\w./-]*[\w/]")
MODULE = re.compile(r"-m (benchmarks(?:\.\w+)+)")
RESULTS_FILE = re.compile(r"((?:[\w.-]+/)*RESULTS[\w.-]*\.md)")
QUOTED = re.compile(r'"([^"]+)"')
CITED = re.compile(r'^[`\])]*(?:\([^)]*\))?[`]*(?:, \(?| \()((?:"[^"]+"(?:,? and |, )?)+)')


def citing_files() -> list[Path]:
    """Code, docs and tests, and what benchmarks/ says of itself (not its history)."""
    found = [REPO / "README.md", REPO / "Makefile", REPO / "pyproject.toml"]
    for folder, patterns in ((REPO / "dliobench", ("*.py", "*.c", "*.h", "*.md")),
                             (REPO / "docs", ("*.md",)), (REPO / "tests", ("*.py", "*.md")),
                             (BENCH, ("*.py", "*.md"))):
        for pattern in patterns:
            found += [p for p in folder.rglob(pattern) if HISTORY not in p.parents]
    return found


@functools.cache
def headings(path: Path) -> list[str]:
    return [" ".join(m.group(1).split())
            for m in re.finditer(r"^#+ (.+)$", path.read_text(), re.M)]


def flat(text: str) -> str:
    """Comment markers and line breaks out of the way of a citation that wraps."""
    return " ".join(" ".join(re.sub(r"^\s*(?:#|\*|//)", "", line)
                             for line in text.splitlines()).split())


def test_every_cited_benchmarks_path_and_module_exists() -> None:
    missing = []
    for path in citing_files():
        text = path.read_text()
        missing += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in PATH.finditer(text)
                    if not (REPO / m.group(0)).exists()]
        missing += [f"{path.relative_to(REPO)}: -m {m.group(1)}" for m in MODULE.finditer(text)
                    if not (REPO / (m.group(1).replace(".", "/") + ".py")).is_file()]
    assert not missing, missing


def test_every_cited_results_section_exists() -> None:
    missing, cited = [], 0
    for path in citing_files():
        text = flat(path.read_text())
        for m in RESULTS_FILE.finditer(text):
            quoted = CITED.match(text[m.end():m.end() + 300])
            if not quoted:
                continue
            name = Path(m.group(1)).name
            target = HISTORY / name if "history/" in m.group(1) else RESULTS
            assert target.is_file(), f"{path.relative_to(REPO)}: {m.group(1)}"
            for section in QUOTED.findall(quoted.group(1)):
                cited += 1
                if not any(section.lower() in h.lower() for h in headings(target)):
                    missing.append(f"{path.relative_to(REPO)}: {name}, \"{section}\"")
    assert cited >= 8 and not missing, missing


def test_every_goal_row_and_history_reference_of_results_resolves() -> None:
    text = RESULTS.read_text()
    own = headings(RESULTS)
    table = text.split("## Goals at a glance", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| goal")]
    assert len(rows) >= 25
    assert not [r for r in rows if r.rstrip(" |").rsplit(" | ", 1)[1] not in own]
    assert len(text.splitlines()) < 600
    history = [h for p in HISTORY.glob("*.md") for h in headings(p)]
    refs = [q for para in re.split(r"\n(?=- )", text) if "history," in para
            for q in QUOTED.findall(flat(para).split("history,", 1)[1])]
    assert refs and not [q for q in refs if not any(q.lower() in h.lower() for h in history)]


def scripts() -> list[str]:
    return sorted(".".join(p.relative_to(REPO).with_suffix("").parts)
                  for p in BENCH.rglob("*.py")
                  if p.name != "__init__.py" and HISTORY not in p.parents)


def test_every_benchmark_script_imports_without_running() -> None:
    """In a child process: some set environment variables for the libraries they load."""
    names = scripts()
    assert len(names) >= 40
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    importlib.import_module(name)\n")
    proc = subprocess.run([sys.executable, "-c", code, *names], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not proc.stdout  # importing prints nothing: main() did not run


def test_no_import_cycle_in_benchmarks() -> None:
    """The graph of imports between benchmarks' modules, wherever in a module they sit."""
    graph: dict[str, set[str]] = {}
    for name in scripts():
        tree = ast.parse((REPO / (name.replace(".", "/") + ".py")).read_text())
        deps = graph.setdefault(name, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("benchmarks.")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks"):
                mod = node.module or ""
                deps |= {f"{mod}.{a.name}" if f"{mod}.{a.name}" in graph or
                         (REPO / f"{mod}.{a.name}".replace(".", "/")).with_suffix(".py").is_file()
                         else mod for a in node.names}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path, node, dep]
            if dep not in state and (cycle := visit(dep, [*path, node])):
                return cycle
        state[node] = 2
        return []

    for start in graph:
        if start not in state:
            assert not (cycle := visit(start, [])), " -> ".join(cycle)


def test_every_rerun_entry_names_a_script_and_a_section() -> None:
    """``benchmarks.harness.rerun``'s catalogue: each entry's module is a script here and
    feeds a section RESULTS.md has."""
    from benchmarks.harness.rerun import CATALOGUE

    headings = {line[3:].strip() for line in RESULTS.read_text().splitlines()
                if line.startswith("## ")}
    assert len({e.name for e in CATALOGUE}) == len(CATALOGUE)
    for e in CATALOGUE:
        assert (REPO / Path(*e.argv[0].split("."))).with_suffix(".py").is_file(), e.name
        assert e.section in headings, e.name
