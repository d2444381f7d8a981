"""The calibrated projection's figure: AU and read bandwidth against accelerators, the
projection with its band beside the runs it was fitted on (and runs it was checked against)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from dliobench.report.plots.figure import DPI


def _measured(ax: Any, runs: list[dict[str, Any]], key: str, scale: float, label: str,
              hollow: bool) -> None:
    # an AU measured at another compute per batch or batch size is not the projection's
    runs = [r for r in runs if r[key] is not None and (key != "au" or r["comparable"])]
    if runs:
        ax.plot([r["ranks"] for r in runs], [r[key] * scale for r in runs], linestyle="none",
                marker="o" if not hollow else "s", markersize=8, color="black",
                markerfacecolor="white" if hollow else "black", label=label, zorder=4)


def draw(doc: dict[str, Any], path: Path) -> Path:
    """Write the figure of ``projection.project``'s document to ``path`` (PNG)."""
    rows = doc["projection"]
    n = [r["accelerators"] for r in rows]
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    ax_au, ax_bw = fig.subplots(1, 2)
    bound = doc["bandwidth"]["lower_bound_only"]
    what = "projection (at least)" if bound else "projection"
    per_au = doc["step_bytes"] / doc["compute_s"] / 1e6  # MB/s of one rank at AU 1
    for ax, scale, key in ((ax_au, 100.0, "au"), (ax_bw, per_au, "bw")):
        def values(k: str, scale: float = scale, key: str = key) -> list[float]:
            return [r[k] * scale * (r["accelerators"] if key == "bw" else 1) for r in rows]
        ax.fill_between(n, values("au_low"), values("au_high"), color="C0", alpha=0.2,
                        label="uncertainty band", linewidth=0)
        ax.plot(n, values("au"), color="C0", linewidth=2, label=what)
        measured = "au" if key == "au" else "bytes_per_s"
        factor = 100.0 if key == "au" else 1e-6
        _measured(ax, doc["runs"], measured, factor, "measured (fitted)", False)
        _measured(ax, doc["checks"], measured, factor, "measured (not fitted)", True)
        ax.set_xscale("log", base=2)
        ax.set_xticks(n, [str(k) for k in n])
        ax.minorticks_off()
        ax.set_xlabel("accelerators (ranks)")
        ax.grid(alpha=0.3)
    ax_au.axhline(100 * doc["au_floor"], color="grey", linestyle="--", linewidth=1,
                  label=f"AU floor {100 * doc['au_floor']:g} %")
    ax_au.set_ylim(0, 105)
    ax_au.set_ylabel("AU (%)")
    ax_au.set_title("accelerator utilization")
    b = doc["bandwidth"]
    ax_bw.axhline(b["bytes_per_s"] / 1e6, color="C1", linestyle="--", linewidth=1,
                  label="storage bandwidth" + (" (at least)" if bound else " (fitted)"))
    ax_bw.set_ylim(bottom=0)
    ax_bw.set_ylabel("read MB/s, all ranks (MB = $10^6$ bytes)")
    ax_bw.set_title("bytes read per second")
    handles, labels = ax_au.get_legend_handles_labels()
    more = [(h, lab) for h, lab in zip(*ax_bw.get_legend_handles_labels(), strict=True)
            if lab not in labels]
    fig.legend(handles + [h for h, _ in more], labels + [lab for _, lab in more],
               loc="outside lower center", ncols=3)
    fig.suptitle(f"{doc['workload']} ({doc['accelerator']}): AU projected from "
                 f"{len(doc['runs'])} run(s)" + ("\nno run saturated the storage: its bandwidth "
                                                 "and the AU are lower bounds" if bound else ""))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path
