"""Folder keys checked before anything is written: a folder that is, or lies under, a
regular file (or a symlink loop), or that cannot be written (a read-only mount), is a
configuration error, said in one sentence; and whether a folder's file system takes O_DIRECT
reads, probed with a real file, so a run knows before it starts whether it reads storage."""

from __future__ import annotations

import errno
import mmap
import os
import stat
import tempfile

from dliobench.base.errors import ConfigError
from dliobench.config.schema import Config
from dliobench.storage.fsinfo import mount_of
from dliobench.storage.location import is_url, parse_s3
from dliobench.storage.posix_io import ALIGN


def folder_keys(config: Config, train: str) -> list[tuple[str, str]]:
    """(key, folder) of every folder this configuration writes or reads (``train``: the
    training files' folder under the data folder)."""
    data = config.dataset.data_folder
    keys = [("dataset.data_folder", data),
            ("dataset.data_folder", data if is_url(data) else os.path.join(data, train)),
            ("output.folder", config.output.folder)]
    if config.storage.stage_to:
        keys.append(("storage.stage_to", config.storage.stage_to))
    if config.workflow.checkpoint:
        keys.append(("checkpoint.checkpoint_folder", config.checkpoint.checkpoint_folder))
    return keys


def check_folders(config: Config, train: str) -> None:
    """Raise ConfigError when a folder of ``config`` cannot be a folder."""
    for key, folder in folder_keys(config, train):
        if is_url(folder):
            parse_s3(folder, key)  # an object store: only its URL can be checked here
            continue
        problem = folder_problem(folder)
        if problem:
            raise ConfigError(f"{key}: {folder} {problem}; choose another {key}")


def folder_problem(folder: str) -> str | None:
    """Why ``folder`` cannot be a folder (it or an ancestor is not one), or None."""
    path = os.path.abspath(folder)
    while True:
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return f"cannot be reached: {path} is a symlink loop"
            return f"cannot be reached: {path}: {exc.strerror}"
        if stat.S_ISDIR(mode):
            return None
        kind = "a regular file" if stat.S_ISREG(mode) else "a special file"
        if path == os.path.abspath(folder):
            return f"is {kind}, not a folder"
        return f"lies under {path}, which is {kind}"


MEMORY_FILE_SYSTEMS = ("tmpfs", "ramfs")  # their files live in RAM: reads never reach storage
PROBE_PREFIX = ".dliobench-probe-"


def write_places(config: Config, generating: bool, existing: bool) -> list[tuple[str, str]]:
    """(key, folder) of every place on this host a command writes: the data folder (its lock,
    manifest and files) unless the dataset is an ``existing`` one (its index goes elsewhere
    when the folder is read-only) or the run only checkpoints; with a run (``generating``
    False) also the results, staged copy and checkpoints. Object stores are left out."""
    places = []
    checkpoint_only = config.workflow.checkpoint_only
    if not existing and (generating or not checkpoint_only):
        places.append(("dataset.data_folder", config.dataset.data_folder))
    if not generating:
        if config.workflow.train or config.workflow.checkpoint:  # what writes results
            places.append(("output.folder", config.output.folder))
        if config.storage.stage_to and config.workflow.train:
            places.append(("storage.stage_to", config.storage.stage_to))
        if config.workflow.checkpoint:
            places.append(("checkpoint.checkpoint_folder", config.checkpoint.checkpoint_folder))
    return [(key, folder) for key, folder in places if not is_url(folder)]


def check_writable(places: list[tuple[str, str]]) -> None:
    """Raise ConfigError, naming the key and the path, for the first place that cannot be
    written: not a folder, or its nearest existing folder refuses a new file (a read-only
    mount, no permission). Root passes permission bits, so a real file is created there."""
    for key, folder in places:
        problem = folder_problem(folder)
        if problem:
            raise ConfigError(f"{key}: {folder} {problem}; choose another {key}")
        problem = unwritable(folder)
        if problem:
            raise ConfigError(f"{key}: {folder} {problem}; choose another {key} or make it "
                              "writable")


def nearest_existing(folder: str) -> str:
    """``folder`` or its nearest existing ancestor (where a new subfolder would be made)."""
    path = os.path.abspath(folder)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def unwritable(folder: str) -> str | None:
    """Why nothing can be written in ``folder`` (or in its nearest existing ancestor, where it
    would be made), found by creating and removing a probe file there; None when it can."""
    base = nearest_existing(folder)
    try:
        fd, probe = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=base)
    except OSError as exc:
        where = "" if base == os.path.abspath(folder) else f" (at {base}, where it would be made)"
        return f"cannot be written{where}: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None


def reads_direct(folder: str) -> bool | None:
    """Whether the file system of ``folder`` (or of its nearest existing ancestor) takes
    O_DIRECT reads: a one-block probe file is written there, read back with O_DIRECT and
    removed (tmpfs before Linux 6.6, ramfs and some FUSE mounts refuse it with EINVAL);
    None when no probe file can be written there (a read-only dataset)."""
    if not hasattr(os, "O_DIRECT"):
        return False
    try:
        fd, probe = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=nearest_existing(folder))
    except OSError:
        return None
    try:
        os.write(fd, bytes(ALIGN))
        os.close(fd)
        return _read_direct_block(probe)
    finally:
        os.unlink(probe)


def _read_direct_block(path: str) -> bool:
    """Read the first block of ``path`` with O_DIRECT into page-aligned memory; False when the
    file system refuses (EINVAL at the open or at the read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    try:
        with mmap.mmap(-1, ALIGN) as block:  # anonymous memory is page aligned
            os.preadv(fd, [block], 0)
        return True
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    finally:
        os.close(fd)


def file_system(folder: str) -> str:
    """The type of the file system ``folder`` is (or would be made) on, e.g. ext4, tmpfs."""
    return str(mount_of(nearest_existing(folder))["fs_type"])
