"""Which accelerator a run emulated, decided once for the report's labels and ``check``.

The console names it by ``config.profiles.profile_name`` (the profile whose compute time per
batch the run used); the rules also know upstream's v3.0 files, which name no accelerator key
(the accelerator is in the file's name and its ``train.computation_time``). One function
applies both, in that order, so a label and a finding never name two accelerators for one run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dliobench.config.profiles import profile_name
from dliobench.report.rules import references


@dataclass(frozen=True)
class Accelerator:
    """The accelerator a run stands for, how that is known, and whether the run's compute time
    per batch is that accelerator's (False: named, but timed as no profile is)."""

    name: str  # "" when nothing tells
    how: str
    own_figures: bool

    @property
    def label(self) -> str:
        """The name as tables print it: ``custom`` where the figures are no profile's, as the
        console says (``custom (b200 named)`` when the run named one)."""
        if self.own_figures and self.name:
            return self.name
        return f"custom ({self.name} named)" if self.name else "custom"


def which(workload: str, config: dict[str, Any]) -> Accelerator:
    """The profile the run named, while its compute time is that profile's; else the one
    upstream v3.0 file of its workload with its compute time; else the one profile with it;
    else the name it gave with figures of its own; else none."""
    train = config.get("train") or {}
    named, compute = str(train.get("accelerator") or ""), train.get("computation_time")
    profile = profile_name(config)
    if named and profile == named:
        return Accelerator(named, "named by train.accelerator", True)
    also = f"; train.accelerator names {named}" if named else ""
    ref = references.by_compute(workload, compute)
    if ref is not None:
        return Accelerator(ref.accelerator, f"inferred: train.computation_time = {compute} s "
                           f"is {ref.name}'s{also}", True)
    if profile != "custom":
        return Accelerator(profile, f"inferred: train.computation_time = {compute} s is the "
                           f"{profile} profile's{also}", True)
    if named:
        return Accelerator(named, f"named by train.accelerator, with train.computation_time = "
                           f"{compute} s, which is not its profile's", False)
    known = ", ".join(f"{r.accelerator} {references.flattened(r)['train.computation_time']} s"
                      for r in references.of_workload(workload)) or "none"
    return Accelerator("", f"not named (train.accelerator is empty) and "
                       f"train.computation_time = {compute} s is no v3.0 "
                       f"{workload or 'workload'} file's ({known})", False)
