"""Accelerator profiles: the ``accelerators:`` section (compute time per batch, AU floor,
optionally the batch size) and how the chosen one (``train.accelerator``) supplies
``train.computation_time``, ``metric.au`` and ``reader.batch_size`` unless those are set as
late or later."""

from __future__ import annotations

from typing import Any

from dliobench.base.errors import ConfigError
from dliobench.config import values as cv
from dliobench.config.schema import AcceleratorProfile


def merge_profiles(sections: list[tuple[str, dict[str, Any]]]) -> dict[str, AcceleratorProfile]:
    """The ``accelerators`` sections of the layers ((origin, section), later ones winning),
    merged and checked."""
    merged: dict[str, dict[str, Any]] = {}
    for origin, section in sections:
        for name, profile in section.items():
            if not isinstance(profile, dict):
                raise ConfigError(f"accelerators.{name} in {origin} must be a mapping "
                                  "{computation_time: S, au: F, batch_size: N}")
            merged.setdefault(str(name), {}).update(profile)
    out = {}
    for name, p in merged.items():
        unknown = set(p) - {"computation_time", "au", "computation_time_stdev", "batch_size"}
        if unknown or "computation_time" not in p or "au" not in p:
            raise ConfigError(f"accelerators.{name} must have computation_time and au "
                              "(optionally computation_time_stdev, batch_size), nothing else")
        mean, stdev = cv.to_seconds(f"accelerators.{name}.computation_time", p["computation_time"])
        out[name] = AcceleratorProfile(
            computation_time=mean,
            au=cv.to_float(f"accelerators.{name}.au", p["au"]),
            computation_time_stdev=cv.to_float(
                f"accelerators.{name}.computation_time_stdev",
                p.get("computation_time_stdev", stdev or 0.0),
            ),
            batch_size=_batch_size(name, p.get("batch_size")),
        )
    return out


def _batch_size(name: str, value: Any) -> int | None:
    """A profile's batch size: a positive integer, or None when it has none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"accelerators.{name}.batch_size must be a positive integer, "
                          f"got {value!r}")
    return value


def apply_profile(raw: dict[str, Any], origin: dict[str, int],
                   profiles: dict[str, AcceleratorProfile]) -> None:
    """Let the chosen accelerator supply compute time and AU floor, unless set as late."""
    name = str(raw.get("train.accelerator") or "")
    if not name:
        return
    if name not in profiles:
        have = ", ".join(sorted(profiles)) or "none"
        raise ConfigError(f"train.accelerator: this workload has no '{name}' profile; "
                          f"it has: {have}")
    profile, level = profiles[name], origin["train.accelerator"]
    supplied: list[tuple[str, Any]] = [
        ("train.computation_time", profile.computation_time),
        ("train.computation_time_stdev", profile.computation_time_stdev),
        ("metric.au", profile.au)]
    if profile.batch_size is not None:
        supplied.append(("reader.batch_size", profile.batch_size))
    for key_name, value in supplied:
        if origin.get(key_name, -1) < level:
            raw[key_name], origin[key_name] = value, level


def profile_name(cfg: dict[str, Any]) -> str:
    """The accelerator a run's configuration (as result.json holds it) emulated: the profile
    it named, while its compute time and batch are still that profile's; else the one profile
    whose figures they are (a user who gave unet3d's b200 figures without naming it emulated
    the b200); else "custom". The one place the console and the report tables take it from."""
    train, profiles = cfg.get("train") or {}, cfg.get("accelerators") or {}
    named = str(train.get("accelerator") or "")
    if named and named not in profiles:  # a result written without its profiles
        return named
    matching = [name for name, p in profiles.items() if _matches(p, cfg)]
    if named in matching:
        return named
    return matching[0] if len(matching) == 1 else "custom"


def _matches(profile: dict[str, Any], cfg: dict[str, Any]) -> bool:
    """Whether the run's compute time per batch (and batch size, where the profile sets
    one) are the profile's."""
    compute = (cfg.get("train") or {}).get("computation_time")
    batch = (cfg.get("reader") or {}).get("batch_size")
    if not isinstance(compute, (int, float)) or not isinstance(
            profile.get("computation_time"), (int, float)):
        return False
    return (abs(float(profile["computation_time"]) - float(compute)) <= 1e-12
            and profile.get("batch_size") in (None, batch))
