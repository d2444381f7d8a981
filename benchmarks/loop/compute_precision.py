"""Measure how closely the accelerator emulation holds the configured compute time.

Usage: python -m benchmarks.loop.compute_precision [--steps N]
Prints, per configured duration, the median and p99 of (measured - configured) and the
relative median error; record the output in benchmarks/RESULTS.md with the date and machine.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from benchmarks.harness.records import Recorder
from dliobench.run.accelerator import busy_wait

DURATIONS_S = (0.0005, 0.0035, 0.0055, 0.05, 0.224, 0.323)


def main() -> None:
    """Run the measurement and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200, help="steps per duration")
    args = parser.parse_args()
    record = Recorder(__file__)
    results: dict[str, list[float]] = {}
    print(f"# compute precision, {time.strftime('%Y-%m-%d')}, {platform.node()}, "
          f"{platform.processor() or platform.machine()}, {args.steps} steps each\n")
    print("| configured | median measured | median error | p99 error | relative median error |")
    print("|---|---|---|---|---|")
    for d in DURATIONS_S:
        steps = max(5, min(args.steps, int(20 / d)))
        measured = np.empty(steps)
        for i in range(steps):  # timed from outside, call overhead included
            t0 = time.perf_counter()
            busy_wait(d)
            measured[i] = time.perf_counter() - t0
        err = measured - d
        results[f"{d * 1e3:.2f} ms error us"] = list(err * 1e6)
        print(f"| {d * 1e3:.2f} ms | {np.median(measured) * 1e3:.4f} ms | "
              f"{np.median(err) * 1e6:.1f} us | {np.percentile(err, 99) * 1e6:.1f} us | "
              f"{np.median(err) / d * 100:.3f} % |")
    print(f"\n- record: {record.write(results, steps=args.steps)}")


if __name__ == "__main__":
    main()
