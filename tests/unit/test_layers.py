"""The house's layers, read from the source (no import of the package): every import, at the
top of a module, inside a function or under ``TYPE_CHECKING``, points down or sideways, and no
two modules import each other, however indirectly.

The order, lowest first, is the one the code teaches:

- ``base``: errors, units, interrupts, leftovers, the registries' names (``config.names``) and
  the package's version: what every layer may say or raise.
- ``comm``: the ``World`` and ``Comm`` every rank-aware function receives; it knows nothing of
  configuration or storage (``launch`` only picks mpi or torch). A launcher's abort
  choreography that must print or read results belongs above, or gets its own line here.
- ``config``: what a configuration *is* (the frozen schema, its key metadata, value parsing,
  the DLIO key tables, profiles and rules over a ``Config``): pure data, no I/O, so the schema
  loads without numpy, storage or the C extension.
- ``storage``: the storage seam (backends, buffers, atomic writes, file-system facts), which
  takes a ``StorageConfig`` section.
- ``config loading``: reading YAML, overrides, shipped workloads, secrets, and checking the
  folders a configuration names: it reads files and stats folders through storage, so it sits
  above it; nothing below it reads a file of configuration.
- ``formats``: bytes of one file through a backend; the registry.
- ``bounds``: memory a rank would need, from a configuration and a format's sizes.
- ``dataset shape``: file names (layout), sharding and permutations, and the ``Plan`` value
  type that carries them: what generation, checking, staging and the loaders all read, so
  the plan's types sit below the dataset's operations (dataset imports plan, never the reverse).
- ``dataset``: generation, manifest, indexing, checks, locks, staging.
- ``loaders``: batches of a plan's samples (loaders reuse the dataset's writer pool and
  sharding).
- ``results``: the documents and the measurement records of a run (timeline, journals,
  schema, assembly from facts, verdict): documents that take facts as arguments. The first
  sketch put run below results; the code teaches the reverse: the loop journals its
  measurements and the session assembles and writes the result through these modules, while
  results needs nothing of the run (its facts are handed in: ``run.facts``).
- ``run``: assembling a run (resolve the plan, check it, prepare the dataset), the loop,
  checkpoints, the client ceiling and its judgement.
- ``report`` and ``rules``: many results read back; they may use the run's ceiling model.
- ``cli``: argv and one function per subcommand.

A module's layer is its longest matching prefix in ``LAYERS`` (one table: moving a module
edits one line). Type-hint-only imports count: a hint is a dependency of meaning (mypy
follows it), and every one of them so far could point down.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dliobench"

LAYER_ORDER = ["base", "comm", "config", "storage", "config loading", "formats", "bounds",
               "dataset shape", "dataset", "loaders", "results", "run", "report", "cli"]

LAYERS: dict[str, str] = {
    "dliobench.__init__": "base",
    "dliobench.base": "base",
    "dliobench.config.names": "base",
    "dliobench.comm": "comm",
    "dliobench.config": "config",
    "dliobench.storage": "storage",
    "dliobench.config.load": "config loading",
    "dliobench.config.folders": "config loading",
    "dliobench.config.yamlfile": "config loading",
    "dliobench.config.hydra": "config loading",
    "dliobench.config.secrets": "config loading",
    "dliobench.config.shipped": "config loading",
    "dliobench.formats": "formats",
    "dliobench.dataset.bounds": "bounds",
    "dliobench.dataset.layout": "dataset shape",
    "dliobench.dataset.sharding": "dataset shape",
    "dliobench.dataset.permutation": "dataset shape",
    "dliobench.dataset.plan": "dataset shape",
    "dliobench.dataset": "dataset",
    "dliobench.loaders": "loaders",
    "dliobench.results": "results",
    "dliobench.run": "run",
    "dliobench.run.vectordb": "run",  # the vector-database type (its figures: results.vdb_*)
    "dliobench.report": "report",
    "dliobench.cli": "cli",
    "dliobench.__main__": "cli",
}


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package is its ``__init__``; the root
    package is ``dliobench.__init__``; compiled extensions count as modules without imports,
    by their C source too, so a tree where the extension is not built yet reads the same)."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in (".py", ".so", ".c") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE.parent).parts)
        parts[-1] = parts[-1].split(".")[0]
        if parts[-1] == "__init__" and len(parts) > 2:
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = module_files()


def _owner(name: str) -> str | None:
    """The module that ``name`` (a module or a module's attribute) lives in."""
    if name == "dliobench":
        return "dliobench.__init__"
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def parsed(module: str) -> ast.Module:
    """The syntax tree of a ``.py`` module (parsed once for every scan)."""
    path = MODULES[module]
    return ast.parse(path.read_text(), str(path))


def _face(name: str) -> str | None:
    """The package's ``__init__`` that ``from name import ...`` runs and reads its names from
    (Python looks a name up in the package first, even a submodule's), or None when ``name``
    is a plain module."""
    if name == "dliobench":
        return "dliobench.__init__"
    path = MODULES.get(name)
    return name if path is not None and path.name == "__init__.py" else None


def imports_of(module: str) -> set[str]:
    """The package's modules ``module`` imports anywhere in its text."""
    path = MODULES[module]
    if path.suffix != ".py":
        return set()
    package = module.rpartition(".")[0] if path.name != "__init__.py" else module
    if module == "dliobench.__init__":
        package = "dliobench"
    found: set[str | None] = set()
    for node in ast.walk(parsed(module)):
        if isinstance(node, ast.Import):
            found |= {_owner(alias.name) for alias in node.names
                      if alias.name.split(".")[0] == "dliobench"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(head + ([base] if base else []))
            if base.split(".")[0] != "dliobench":
                continue
            found |= {_owner(f"{base}.{alias.name}") for alias in node.names}
            found.add(_face(base))
    return {name for name in found if name and name != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def layer_of(module: str) -> str:
    """The layer of ``module``: its longest prefix in ``LAYERS``."""
    best = max((key for key in LAYERS if module == key or module.startswith(key + ".")),
               key=len, default=None)
    if best is None:
        pytest.fail(f"{module} is in no layer: add its prefix to LAYERS in {__file__}")
    return LAYERS[best]


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Each import from a lower layer to a higher one, as a sentence."""
    rank = {name: i for i, name in enumerate(LAYER_ORDER)}
    return [f"{low} ({layer_of(low)}) imports {high} ({layer_of(high)})"
            for low in sorted(graph) for high in sorted(graph[low])
            if rank[layer_of(low)] < rank[layer_of(high)]]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_the_table_names_real_modules_and_known_layers() -> None:
    """A stale table entry (a module moved away) or a layer name typo fails, so the table
    stays the one true map."""
    assert set(LAYERS.values()) <= set(LAYER_ORDER)
    stale = [key for key in LAYERS
             if not any(m == key or m.startswith(key + ".") for m in MODULES)]
    assert not stale, f"LAYERS names modules that do not exist: {stale}"


def test_no_import_points_up() -> None:
    """Every import (top level, in a function, type-hint only) goes down or sideways."""
    found = upward(GRAPH)
    if found:
        pytest.fail("upward imports (move the code, or the module's line in LAYERS):\n"
                    + "\n".join(found), pytrace=False)


def test_no_import_cycle() -> None:
    """No module reaches itself through imports."""
    found = cycles(GRAPH)
    if found:
        pytest.fail(f"import cycles: {found}", pytrace=False)


@functools.cache
def defined_in(module: str) -> frozenset[str]:
    """The names ``module``'s own text defines at top level (functions, classes, assignments,
    also under ``if``/``try``), not those it imports."""
    names: set[str] = set()
    body = list(parsed(module).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try)):
            body += node.body + node.orelse + getattr(node, "finalbody", [])
    return frozenset(names)


def through_faces(module: str) -> list[str]:
    """Each ``from P import x`` in ``module`` where P's ``__init__`` imports modules of the
    package and ``x`` is not its own: a submodule, or a name P only re-exports."""
    path = MODULES[module]
    if path.suffix != ".py":
        return []
    found = []
    for node in ast.walk(parsed(module)):
        if not isinstance(node, ast.ImportFrom):
            continue
        face = _face(node.module or "")
        if face is None or not GRAPH[face]:
            continue
        own = defined_in(face)
        found += [f"{module}:{node.lineno} takes {alias.name} from {face}"
                  for alias in node.names if alias.name not in own]
    return found


def test_imports_name_the_defining_module() -> None:
    """A package's ``__init__`` that imports is its face for users (tests, scripts); inside
    the package a name or a submodule is imported from the module that defines it, so the face
    never becomes a hub that its own modules reach back through (the storage package did:
    docs/ARCHITECTURE.md, "Layers")."""
    found = [line for module in sorted(MODULES) for line in through_faces(module)]
    if found:
        pytest.fail("imports through a package's face (import the defining module: "
                    "`from P.mod import name`, `import P.mod as mod`):\n" + "\n".join(found),
                    pytrace=False)


def test_the_scan_sees_every_kind_of_import() -> None:
    """The scan's own check, on the real tree: a top-level import, one inside a function
    (``storage.timed``), one under ``TYPE_CHECKING`` (the loaders' ``Plan``); and the
    cycle and upward finders on made-up graphs."""
    assert "dliobench.base.errors" in GRAPH["dliobench.formats"]
    assert "dliobench.storage.s3" in GRAPH["dliobench.storage"]
    assert "dliobench.dataset.plan" in GRAPH["dliobench.loaders"]
    assert _owner("dliobench.results.verdict.verdict") == "dliobench.results.verdict"
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _face("dliobench.storage") == "dliobench.storage"  # a package: its __init__
    assert _face("dliobench.storage.posix") is None
    assert "backend_for" in defined_in("dliobench.storage")
    assert "PosixBackend" not in defined_in("dliobench.storage")  # imported, not defined
    assert upward({"dliobench.base.errors": {"dliobench.cli.main"}, "dliobench.cli.main": set()})


def test_the_house_stays_small() -> None:
    """A newcomer sees the subsystems from the folder list (at most 13 entries at the top) and
    reads any module whole (none over 350 lines): docs/ARCHITECTURE.md, "Layers"."""
    top = sorted(p.name for p in PACKAGE.iterdir()
                 if p.name != "__pycache__" and p.suffix not in (".so", ".pyc"))
    assert len(top) <= 13, top
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > 350}
    assert not long, long
