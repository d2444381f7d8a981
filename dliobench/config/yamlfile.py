"""Reading the YAML a user hands us (workload and sweep files, override values), safely.

PyYAML's safe loading, plus what it lets through: a file too large to be a workload, bytes
that are not UTF-8, a key given twice (PyYAML keeps the last one without a word) and aliases
that expand into more nodes than any workload has ("billion laughs"). Each is a
``ConfigError`` naming the file and, where there is one, the line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from dliobench.base.errors import ConfigError
from dliobench.storage.posix_io import open_regular

MAX_FILE_BYTES = 1 << 20  # a workload or sweep file is a few KiB
MAX_NODES = 100_000  # nodes after alias expansion; the largest shipped workload has ~200
MERGE_TAG = "tag:yaml.org,2002:merge"


class NotYAML(ConfigError):
    """The text does not parse as YAML (as opposed to YAML we refuse)."""


class _Loader(yaml.SafeLoader):
    """SafeLoader refusing duplicate keys and alias expansion beyond ``MAX_NODES``."""

    origin = "YAML"

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if node is not None and _expanded(node, {}, set()) > MAX_NODES:
            raise ConfigError(f"{self.origin}: its aliases (*name) expand to more than "
                              f"{MAX_NODES:,} values, far more than any workload; write the "
                              "values out or remove the aliases")
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG or not isinstance(key_node, ScalarNode):
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(f"{self.origin}: key '{key}' is given twice, at lines "
                                  f"{seen[key]} and {line}; keep one of them")
            seen[key] = line
        return super().construct_mapping(node, deep)


def _expanded(node: Node, sizes: dict[int, int], path: set[int]) -> int:
    """Nodes in ``node`` with every alias written out (shared nodes counted once per use)."""
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in path:  # a recursive alias: its expansion never ends
        return MAX_NODES + 1
    path.add(id(node))
    total = 1
    if isinstance(node, SequenceNode):
        children: list[Node] = list(node.value)
    elif isinstance(node, MappingNode):
        children = [n for pair in node.value for n in pair]
    else:
        children = []
    for child in children:
        total += _expanded(child, sizes, path)
        if total > MAX_NODES:
            break
    path.discard(id(node))
    sizes[id(node)] = total
    return total


def parse(text: str, origin: str) -> Any:
    """The document in ``text``; a YAML error is a ConfigError naming ``origin`` and the line."""
    loader = None
    try:
        loader = _Loader(text)  # checks the characters already
        loader.origin = origin
        return loader.get_single_data()
    except yaml.reader.ReaderError as exc:
        line = text[:exc.position].count("\n") + 1
        raise NotYAML(f"{origin} holds a control character YAML does not allow "
                      f"(#x{exc.character:04x}) on line {line}; remove it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "a syntax error"
        raise NotYAML(f"{origin} is not valid YAML{where} ({problem})") from None
    finally:
        if loader is not None:
            loader.dispose()


def read(path: Path, what: str) -> Any:
    """The YAML document in file ``path`` (``what``: "workload file", "sweep file")."""
    origin = f"{what} {path}"
    try:
        with os.fdopen(open_regular(path), "rb") as f:  # a FIFO is refused, not waited on
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{origin} does not exist; give a path to a YAML file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {origin}: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{origin} is larger than {MAX_FILE_BYTES >> 20} MiB, the most a "
                          "workload or sweep file may be; is it the right file?")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{origin} is not UTF-8 text (byte {exc.start} on line {line}); "
                          "save it as UTF-8") from None
    return parse(text, origin)
