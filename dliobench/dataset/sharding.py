"""Pure functions: which samples a rank reads in an epoch, in which order, in which batches.

Samples have global ids ``file_index * samples_per_file + k``. Shuffles are seeded so every
rank computes the same global order without talking to the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dliobench.dataset.permutation import Permutation


@dataclass(frozen=True)
class ShardSpec:
    """Everything that decides a rank's samples in an epoch."""

    num_files: int
    samples_per_file: int
    rank: int
    size: int
    sharding: str = "sample"  # "sample" or "file"
    file_shuffle: bool = False
    sample_shuffle: bool = False
    seed: int = 123
    seed_change_epoch: bool = True


def epoch_seed(spec: ShardSpec, epoch: int) -> int:
    """The shuffle seed of an epoch: the run's seed, plus the epoch when it should change."""
    return spec.seed + epoch if spec.seed_change_epoch else spec.seed


def _permutation(n: int, seed: int, stream: int) -> np.ndarray:
    return np.random.default_rng([seed, stream]).permutation(n)


def file_at(spec: ShardSpec, epoch: int, positions: np.ndarray) -> np.ndarray:
    """The files at ``positions`` of this epoch's file order (a seeded bijection when files
    are shuffled: no rank ever builds the whole order)."""
    positions = np.asarray(positions, dtype=np.int64)
    if not spec.file_shuffle:
        return positions
    return Permutation(spec.num_files, [epoch_seed(spec, epoch), 1])[positions]


def file_order(spec: ShardSpec, epoch: int) -> np.ndarray:
    """All file indices in this epoch's order (O(files): for tests and small datasets)."""
    return file_at(spec, epoch, np.arange(spec.num_files, dtype=np.int64))


def _expand(files: np.ndarray, samples_per_file: int) -> np.ndarray:
    """Sample ids of the given files, file by file."""
    k = np.arange(samples_per_file, dtype=np.int64)
    return (files[:, None] * samples_per_file + k[None, :]).reshape(-1)


def rank_samples(spec: ShardSpec, epoch: int) -> np.ndarray:
    """This rank's sample ids for an epoch, in delivery order.

    Sample sharding splits the (shuffled) global sample list into contiguous near-equal parts,
    each rank computing only its own part of it (``permutation``); file sharding gives each
    rank whole files and shuffles samples within its share. Ranks get at most one sample (or
    file) more than each other: nothing is dropped here. Memory and time are O(this rank's
    share), whatever the dataset's size.
    """
    seed = epoch_seed(spec, epoch)
    if spec.sharding == "file":
        start, stop = _share(spec.num_files, spec.size, spec.rank)
        mine = file_at(spec, epoch, np.arange(start, stop, dtype=np.int64))
        ids = _expand(mine, spec.samples_per_file)
        if spec.sample_shuffle:
            ids = ids[_permutation(ids.size, seed, 1000 + spec.rank)]
        return ids
    total = spec.num_files * spec.samples_per_file
    start, stop = _share(total, spec.size, spec.rank)
    if spec.sample_shuffle:  # this rank's slice of the global order, never the whole of it
        positions = Permutation(total, [seed, 2]).slice(start, stop)
    else:
        positions = np.arange(start, stop, dtype=np.int64)
    files = file_at(spec, epoch, positions // spec.samples_per_file)
    return files * spec.samples_per_file + positions % spec.samples_per_file


def _share(total: int, parts: int, index: int) -> tuple[int, int]:
    """Bounds of part ``index`` when ``total`` items are split like ``np.array_split``."""
    base, extra = divmod(total, parts)
    start = index * base + min(index, extra)
    return start, start + base + (index < extra)


def rank_sample_count(spec: ShardSpec) -> int:
    """How many samples ``rank_samples`` gives this rank (the same every epoch), cheaply."""
    if spec.sharding == "file":
        files, extra = divmod(spec.num_files, spec.size)
        return (files + (spec.rank < extra)) * spec.samples_per_file
    samples, extra = divmod(spec.num_files * spec.samples_per_file, spec.size)
    return samples + (spec.rank < extra)


def batches(ids: np.ndarray, batch_size: int, drop_last: bool) -> list[np.ndarray]:
    """Consecutive batches of ``ids``; the last partial one is dropped when ``drop_last``."""
    full = ids.size // batch_size
    out = [ids[i * batch_size:(i + 1) * batch_size] for i in range(full)]
    if not drop_last and ids.size % batch_size:
        out.append(ids[full * batch_size:])
    return out


def delivered_exactly_once(planned: np.ndarray, delivered: np.ndarray, expected: int) -> bool:
    """True when ``delivered`` holds ``expected`` distinct ids, all from ``planned``.

    With a planned shard of distinct ids this means: nothing foreign, nothing twice, and
    nothing missing beyond what was left out on purpose (``planned.size - expected``).
    """
    if delivered.size != expected:
        return False
    if not delivered.size:
        return True
    got = np.sort(delivered)  # two sorts: 5x faster than np.unique + np.isin on 4 M ids
    if bool((got[1:] == got[:-1]).any()):
        return False
    plan = np.sort(planned)
    if not plan.size:
        return False
    at = np.minimum(np.searchsorted(plan, got), plan.size - 1)
    return bool((plan[at] == got).all())
