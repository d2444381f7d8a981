"""Workload YAML + ``a.b=c`` overrides -> a validated, frozen ``Config``.

Layers, later ones winning: the defaults in ``config_schema``, the workload file, the
command-line overrides. DLIO 2.0.0 and DLIO main spellings are accepted as aliases; DLIO keys
we know but do not implement produce one warning; anything else is a ``ConfigError`` that
names the key and suggests the closest known one.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dliobench.base.errors import ConfigError
from dliobench.config import rules, yamlfile
from dliobench.config import values as cv
from dliobench.config.dlio import (
    LOADER_ALIASES,
    SECTION_ALIASES,
    UNSUPPORTED_DLIO_KEYS,
    is_unsupported,
)
from dliobench.config.profiles import apply_profile, merge_profiles
from dliobench.config.schema import SECTIONS, Config
from dliobench.storage.location import S3_SCHEME, is_url, parse_s3

IGNORED_TOP_LEVEL = ("framework",)
COMMAND_LINE = "the command line"  # the overrides' layer
INT64_MAX = 2**63 - 1  # integers end up in numpy arrays and file offsets


def _schema() -> tuple[dict[str, dataclasses.Field[Any]], dict[str, str]]:
    """All canonical dotted keys with their fields, and alias -> canonical key."""
    fields: dict[str, dataclasses.Field[Any]] = {}
    aliases: dict[str, str] = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            name = f"{section}.{f.name}"
            fields[name] = f
            for alias in f.metadata["aliases"]:
                aliases[alias if "." in alias else f"{section}.{alias}"] = name
    aliases["output.metric.exclude_start_steps"] = "metric.exclude_start_steps"
    aliases["output.metric.exclude_end_steps"] = "metric.exclude_end_steps"
    aliases["output.metric.au"] = "metric.au"
    aliases["model.model_size"] = "model.model_size_bytes"
    return fields, aliases


FIELDS, ALIASES = _schema()


def known_keys() -> list[str]:
    """Every canonical key, sorted; for help texts and suggestions."""
    return sorted(FIELDS)


class _Layer:
    """The keys one source sets, canonicalised, plus its warnings."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.values: dict[str, Any] = {}
        self.accelerators: dict[str, Any] = {}
        self.unsupported: list[str] = []
        self.warnings: list[str] = []

    def set(self, dotted: str, value: Any) -> None:
        """Record one key, resolving aliases and refusing unknown keys."""
        name = ALIASES.get(dotted, dotted)
        if name in FIELDS:
            self.values[name] = value
        elif is_unsupported(name):
            if value not in (None, False, 0, "", "none", "off", [], {}):
                self.unsupported.append(dotted)
        else:
            raise ConfigError(f"unknown key '{dotted}' in {self.origin}{_suggest(dotted)}")


def _suggest(name: str) -> str:
    """'; did you mean ...?' with the closest known key, or a pointer to the list."""
    candidates = [*FIELDS, *ALIASES, *UNSUPPORTED_DLIO_KEYS]
    leaf = name.rsplit(".", 1)[-1]
    same_leaf = [k for k in FIELDS if k.rsplit(".", 1)[-1] == leaf]
    close = same_leaf or difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if close:
        return f"; did you mean '{ALIASES.get(close[0], close[0])}'?"
    return "; `dliobench keys` lists the known keys"


def _flatten(layer: _Layer, prefix: str, value: Any) -> None:
    """Walk nested sections into dotted keys, stopping at keys whose value may be a mapping."""
    if isinstance(value, dict) and ALIASES.get(prefix, prefix) not in FIELDS:
        for sub, subvalue in value.items():
            _flatten(layer, f"{prefix}.{sub}" if prefix else str(sub), subvalue)
    else:
        layer.set(prefix, value)


def layer_from_mapping(data: Any, origin: str) -> _Layer:
    """Turn a parsed workload document into a layer."""
    if not isinstance(data, dict):
        raise ConfigError(f"{origin} must be a YAML mapping of sections (dataset:, reader:, ...)")
    layer = _Layer(origin)
    for top, value in data.items():
        top = SECTION_ALIASES.get(str(top), str(top))
        if top in IGNORED_TOP_LEVEL:
            continue
        if top == "accelerators":
            if not isinstance(value, dict):
                raise ConfigError(f"accelerators in {origin} must map names to profiles")
            layer.accelerators.update(value)
        elif top == "model" and not isinstance(value, dict):
            layer.set("model.name", value)
        elif top in SECTIONS or is_unsupported(top):
            if value is not None and not isinstance(value, dict):
                raise ConfigError(f"section '{top}' in {origin} must be a mapping of keys")
            _flatten(layer, top, value or {})
        else:
            raise ConfigError(f"unknown section '{top}' in {origin}{_suggest(top)}")
    return layer


def read_workload(path: str | Path) -> _Layer:
    """Read a workload YAML file into a layer; a missing or malformed file is a ConfigError."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"workload file {path} does not exist; give a path to a YAML file "
                          "(examples live in workloads/)")
    data = yamlfile.read(path, "workload file")
    if data is None:  # a truncated or wrong file rather than "all defaults" ({} says that)
        raise ConfigError(f"workload file {path} is empty (no sections, only blank lines or "
                          "comments); write its sections (dataset:, reader:, ...), or {} for "
                          "all defaults")
    layer = layer_from_mapping(data, f"workload file {path}")
    layer.values.setdefault("model.name", path.stem.split("_")[0] if path.stem else "")
    return layer


def parse_overrides(items: list[str]) -> _Layer:
    """``section.key=value`` items (DLIO's ``++workload.`` prefix accepted) into a layer."""
    layer = _Layer(COMMAND_LINE)
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"override '{item}' must look like section.key=value")
        name = name.strip().lstrip("+")
        name = name.removeprefix("workload.")
        section, dot, rest = name.partition(".")
        name = SECTION_ALIASES.get(section, section) + dot + rest
        try:
            value = yamlfile.parse(raw, f"override '{item}'") if raw.strip() else ""
        except yamlfile.NotYAML:
            value = raw  # taken as the string it is
        if name == "model" and not isinstance(value, dict):
            name = "model.name"
        if name.startswith("accelerators."):
            _, acc, field_name = [*name.split("."), "", ""][:3]
            layer.accelerators.setdefault(acc, {})[field_name] = value
            continue
        _flatten(layer, name, value)
    return layer


def _convert(name: str, value: Any) -> Any:
    """Convert one raw value to its key's kind and check its bounds (a secret's value is
    never repeated in the message)."""
    meta = FIELDS[name].metadata
    if meta["secret"] and not isinstance(value, (str, type(None))):
        raise ConfigError(f"{name} must be a string (its value is not shown)")
    kind = meta["kind"]
    word = next((v for raw, v in meta["words"] if type(raw) is type(value) and raw == value),
                None)
    if word is not None:  # a word the key takes as it is (``model``, ``off``)
        out: Any = word
    elif kind == "int":
        out = cv.to_int(name, value)
    elif kind == "size":
        out = cv.to_size(name, value)
    elif kind in ("float", "seconds"):
        out = cv.to_float(name, value)
    elif kind == "bool":
        out = cv.to_bool(name, value)
    elif kind == "choice":
        out = cv.to_choice(name, value, meta["choices"])
    elif kind == "shuffle":
        out = cv.to_shuffle(name, value, meta["choices"])
    elif kind == "name":
        out = cv.to_name(name, value)
    elif kind == "columns":
        out = cv.to_columns(name, value)
    else:  # str, path
        out = cv.to_str(name, value)
    _check_bounds(name, value, out, meta)
    return out


SECONDS_MAX = 1e6  # a duration key's ceiling (11.6 days): longer is a typo, not a plan


def _check_bounds(name: str, value: Any, out: Any, meta: Mapping[str, Any]) -> None:
    """A key's declared minimum and maximum (integers: at most int64), and emptiness."""
    if meta["nonempty"] and not out.strip():
        raise ConfigError(f"{name} is empty; give a folder (use '.' for the current one)")
    low, high = meta["minimum"], meta["maximum"]
    if meta["kind"] in ("int", "size"):
        low = -INT64_MAX if low is None else low
        high = INT64_MAX if high is None else high
    elif meta["kind"] == "seconds" and high is None:
        high = SECONDS_MAX  # 1e300 s would overflow the clock and sleep calls
    if low is not None and out < low:
        raise ConfigError(f"{name}: {value!r} is too small; it must be at least {_num(low)}")
    if high is not None and out > high:
        raise ConfigError(f"{name}: {value!r} is too large; it must be at most {_num(high)}")


def _num(bound: float) -> str:
    """A bound as written: 0, 1, 0.99, 9223372036854775807."""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def _merge(layers: list[_Layer]) -> tuple[dict[str, Any], dict[str, int], list[str]]:
    """Merge layers into raw values, remembering which layer set each key."""
    raw: dict[str, Any] = {}
    origin: dict[str, int] = {}
    warnings: list[str] = []
    for index, layer in enumerate(layers):
        for name, value in layer.values.items():
            if name == "train.computation_time" and isinstance(value, dict):
                mean, stdev = cv.to_seconds(name, value)
                raw["train.computation_time_stdev"] = stdev
                origin["train.computation_time_stdev"] = index
                value = mean
            raw[name], origin[name] = value, index
        if layer.unsupported:
            warnings.append(
                f"{layer.origin} sets DLIO keys dliobench does not implement yet, ignored: "
                + ", ".join(sorted(layer.unsupported))
            )
    loader = str(raw.get("reader.data_loader", "native")).lower()
    if loader in LOADER_ALIASES:
        raw["reader.data_loader"] = LOADER_ALIASES[loader]
        warnings.append(
            f"reader.data_loader={loader} runs with dliobench's {LOADER_ALIASES[loader]} loader "
            "(same files, sharding and batching; DALI's native readers not involved)"
        )
    return raw, origin, warnings


def resolve(layers: list[_Layer], source: str = "") -> tuple[Config, list[str]]:
    """Merge layers, apply aliases and the accelerator profile, convert and validate."""
    raw, origin, warnings = _merge(layers)
    profiles = merge_profiles([(layer.origin, layer.accelerators) for layer in layers])
    apply_profile(raw, origin, profiles)
    sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for name, value in raw.items():
        section, field_name = name.split(".", 1)
        sections[section][field_name] = _convert(name, value)
    built = {name: SECTIONS[name](**values) for name, values in sections.items()}
    folder = _data_folder(built["storage"], built["dataset"].data_folder)
    built["dataset"] = dataclasses.replace(built["dataset"], data_folder=folder)
    if is_url(folder):  # an s3:// folder is on an object store, whatever storage_type said
        built["storage"] = dataclasses.replace(built["storage"], storage_type="s3")
    if is_url(built["checkpoint"].checkpoint_folder):
        parse_s3(built["checkpoint"].checkpoint_folder, "checkpoint.checkpoint_folder")
    given = tuple(sorted({k for layer in layers if layer.origin == COMMAND_LINE
                          for k in layer.values}))
    config = Config(**built, accelerators=profiles, source=source, given=given)
    rules.check(config)
    return config, warnings + rules.advice(config)


def _data_folder(storage: Any, folder: str) -> str:
    """The data folder with DLIO's storage_root applied: joined to a relative folder, or with
    ``storage_type: s3`` the bucket the folder is a prefix in."""
    root = storage.storage_root
    if is_url(folder):
        return parse_s3(folder).url  # a bucket that cannot be one is refused here
    if storage.storage_type == "s3":
        if not root:
            raise ConfigError("storage.storage_type=s3 needs the bucket: set "
                              "storage.storage_root=BUCKET, or give dataset.data_folder as "
                              "s3://BUCKET/PREFIX")
        return f"{S3_SCHEME}{root.strip('/')}/{folder.strip('/')}".rstrip("/")
    if root and not Path(folder).is_absolute():  # DLIO joins storage_root and data_folder
        return str(Path(root) / folder)
    return folder


def load(path: str | Path | None, overrides: list[str] | None = None,
         accelerator: str | None = None) -> tuple[Config, list[str]]:
    """Load a workload file (or only the defaults) with overrides; return config and warnings."""
    layers = [read_workload(path)] if path else []
    extra = list(overrides or [])
    if accelerator:
        extra.append(f"train.accelerator={accelerator}")
    layers.append(parse_overrides(extra))
    return resolve(layers, source=str(path or ""))
