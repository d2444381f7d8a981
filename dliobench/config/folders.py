"""Folder keys checked before anything is written: a folder that is, or lies under, a
regular file (or a symlink loop) is a configuration error, said in one sentence."""

from __future__ import annotations

import errno
import os
import stat

from dliobench.config.schema import Config
from dliobench.errors import ConfigError
from dliobench.storage.location import is_url, parse_s3


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
