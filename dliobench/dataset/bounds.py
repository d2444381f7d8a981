"""Memory a rank needs for a configuration, checked against the host before any work.

A configuration can be valid key by key and still not fit: 100 M files on one rank, a
20 GB resize buffer per sample, a 2 GB sample decoded while others are in flight. Such runs
ended in a MemoryError (or a numpy allocation error) after minutes; they are refused at
once, with what would be needed and what to change.
"""

from __future__ import annotations

import os

from dliobench.base.errors import ConfigError
from dliobench.base.units import size_text
from dliobench.comm.world import World
from dliobench.config.schema import Config
from dliobench.formats import get_format

# Generation's bookkeeping per file of a rank (its file list, results, journal records):
# measured as peak RSS, 200,000 one-byte npz files 285 MB, 50,000 106 MB: 1.2 kB per file.
GENERATION_BYTES_PER_FILE = 1200
SIZE_BYTES_PER_FILE = 8  # every file's drawn sample size, on every rank
ORDER_BYTES_PER_SAMPLE = 24  # a rank's sample order for an epoch, with its shuffled copy
USABLE_SHARE = 0.8  # of the host's memory, shared by its ranks
IMAGE_COPIES = 3  # an image sample's file bytes, the decoder's image and the array


def host_memory_bytes() -> int:
    """Physical memory of this host (what the bounds are checked against; result files
    record it through ``results.sysinfo``)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _sample_bytes(config: Config) -> int:
    """A large sample's bytes in memory: as read (and, for images, decoded), or its resize
    buffer if larger."""
    d = config.dataset
    read = d.record_length_bytes + 3 * d.record_length_bytes_stdev
    if get_format(d.format).compressed_image:
        read *= IMAGE_COPIES
    return max(read, d.record_length_bytes_resize)


def batches_ahead(config: Config) -> int:
    """Batches a rank's loader may have read beyond the one compute holds: the prefetch
    depth, and one per reader besides where each reader reads a batch whole (parquet with
    the native loader; tf.data on every format but TFRecord, whose map reads
    ``read_threads`` whole batches at once: loaders/tfdata/sources.batch_source)."""
    r = config.reader
    fmt = get_format(config.dataset.format)
    whole = (fmt.reads_rows and r.data_loader == "native") or (
        r.data_loader == "tensorflow" and fmt.name != "tfrecord")
    return r.prefetch_size + (r.read_threads if whole else 0)


def needs(config: Config, ranks: int, generating: bool) -> list[tuple[str, int]]:
    """(what, bytes) one of ``ranks`` ranks holds at its peak."""
    d, r = config.dataset, config.reader
    out = [("the samples in flight", (r.batch_size * (batches_ahead(config) + 1)
                                      + r.read_threads) * _sample_bytes(config)),
           ("its sample order", -(-config.total_samples // ranks) * ORDER_BYTES_PER_SAMPLE)]
    if generating:
        files = -(-d.num_files_train // ranks)
        out.append(("the list of files it generates", files * GENERATION_BYTES_PER_FILE
                    + d.num_files_train * SIZE_BYTES_PER_FILE))
    return out


def check_memory(config: Config, world: World, generating: bool) -> None:
    """Refuse a configuration whose ranks would not fit in this host's memory."""
    host = host_memory_bytes()
    budget = host * USABLE_SHARE / max(world.local_size, 1)
    parts = needs(config, world.size, generating)
    total = sum(size for _, size in parts)
    if total <= budget:
        return
    what, biggest = max(parts, key=lambda part: part[1])
    advice = {
        "the samples in flight": "lower reader.batch_size, reader.prefetch_size or "
                                 "dataset.record_length_bytes(_resize)",
        "its sample order": "use more ranks or fewer samples",
        "the list of files it generates": "generate with more ranks (mpiexec -n N) or fewer "
                                          "files",
    }[what]
    raise ConfigError(
        f"each of {world.size} rank(s) would need about {size_text(total)} of memory "
        f"({size_text(biggest)} for {what}), more than the {size_text(budget)} a rank can have "
        f"here ({size_text(host)} of memory, {world.local_size} rank(s) on this host); "
        f"{advice}")
