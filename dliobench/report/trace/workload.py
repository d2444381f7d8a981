"""An ``Inferred`` as a dliobench workload file: the keys grouped by section, each with a
comment saying how it was inferred, and what could not be inferred at the top."""

from __future__ import annotations

from typing import Any

from dliobench.report.trace.infer import Inferred

SECTIONS = ("dataset", "reader", "train")


def yaml_text(got: Inferred, source: str, name: str) -> str:
    """The workload file's text."""
    lines = [f"# Written by `dliobench workload from-trace` from {source}.",
             "# Each value's comment says how it was inferred from the trace."]
    lines += [f"# Not inferred: {u}" for u in got.unknown]
    lines += [f"# Note: {n}" for n in got.notes]
    lines += ["", "model:", f"  name: {name}", "", "workflow:", "  generate_data: true",
              "  train: true"]
    for section in SECTIONS:
        keys = [k for k in got.values if k.startswith(section + ".")]
        if not keys:
            continue
        lines += ["", f"{section}:"]
        for k in keys:
            lines.append(f"  # {got.how[k]}")
            lines.append(f"  {k.split('.', 1)[1]}: {_value(got.values[k])}")
    return "\n".join(lines) + "\n"


def _value(v: Any) -> str:
    """A YAML scalar."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


def summary(got: Inferred) -> list[str]:
    """The inferred values and how, one line each, then what was not inferred."""
    out = [f"{k} = {_value(v)}  ({got.how[k]})" for k, v in got.values.items()]
    out += [f"not inferred: {u}" for u in got.unknown]
    out += [f"note: {n}" for n in got.notes]
    return out
