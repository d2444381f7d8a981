"""The command line: argv parsing and one function per subcommand.

numpy's OpenBLAS starts a thread per core that waits, spinning at times, for work dliobench
never gives it (no linear algebra): one thread is enough. A 16 MiB npy native read on 2 cores
(benchmarks/history/RESULTS-2026-11-22-to-2026-11-25.md,
"OpenBLAS threads") ran at 540-611 samples/s with one thread against 320-607 with the default.
Set before numpy loads; a value the user set is kept.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from dliobench.cli.main import main  # after the variable: its commands import numpy

__all__ = ["main"]
