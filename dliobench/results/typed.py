"""A JSON document checked against the TypedDicts that declare it (``results.schema``).

Declarations are the one source: a field's type there is what a reader may rely on, so the
check walks them (nested TypedDicts, lists, dicts, unions, ``NotRequired``, and
``Annotated[static, checked]`` where writers build a section as a plain dict) rather than
repeating them. JSON has one kind of number: an integer may be written ``3.0``, a float ``3``.
"""

from __future__ import annotations

import json
import types
import typing
from functools import cache
from typing import Annotated, Any, NotRequired

_WORDS = {int: "an integer", float: "a number", str: "text", bool: "true or false",
          type(None): "null", list: "a list", dict: "an object"}


def first_mismatch(doc: dict[str, Any], declared: type) -> str | None:
    """The first field of ``doc`` whose value is not of the type the TypedDict ``declared``
    gives it, in words (``metrics.au is "high", where a number or null belongs``); None when
    all are.

    Only fields present are checked (older minor versions lack some), and fields not
    declared are left alone (newer minor versions add some)."""
    found = _mismatch(doc, declared, "")
    if found is None:
        return None
    where, value, kind = found
    shown = json.dumps(value)
    shown = shown if len(shown) <= 40 else f"{_WORDS.get(type(value), 'a value')}"
    return f"{where} is {shown}, where {_expected(kind)} belongs"


@cache
def _fields(cls: type) -> dict[str, Any]:
    """A TypedDict's declared fields and the types checked: NotRequired unwrapped, and of an
    ``Annotated[static, checked]`` the checked one."""
    return {name: _checked(kind)
            for name, kind in typing.get_type_hints(cls, include_extras=True).items()}


def _checked(kind: Any) -> Any:
    origin = typing.get_origin(kind)
    if origin in (NotRequired, typing.Required):
        return _checked(typing.get_args(kind)[0])
    if origin is Annotated:
        return _checked(kind.__metadata__[-1])
    return kind


def _mismatch(value: Any, kind: Any, where: str) -> tuple[str, Any, Any] | None:
    """(field, value, declared type) of the first mismatch in ``value`` under ``kind``."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return None
    if origin in (types.UnionType, typing.Union):
        members = typing.get_args(kind)
        found = [_mismatch(value, m, where) for m in members]
        if any(f is None for f in found):
            return None
        # one member of the value's shape (an object or a list): the mismatch inside it
        inside = [f for f, m in zip(found, members, strict=True) if _shape_fits(value, m)]
        return inside[0] if len(inside) == 1 and inside[0] else (where, value, kind)
    if not _shape_fits(value, kind):
        return (where, value, kind)
    if typing.is_typeddict(kind):
        items = [(k, t, value[k]) for k, t in _fields(kind).items() if k in value]
        return _first((f"{where}.{k}" if where else k, t, v) for k, t, v in items)
    if origin is list:
        (item,) = typing.get_args(kind)
        return _first((f"{where}[{i}]", item, v) for i, v in enumerate(value))
    if origin is dict:
        _, item = typing.get_args(kind)
        return _first((f"{where}.{k}", item, v) for k, v in value.items())
    return None


def _first(items: typing.Iterable[tuple[str, Any, Any]]) -> tuple[str, Any, Any] | None:
    for where, kind, value in items:
        found = _mismatch(value, kind, where)
        if found is not None:
            return found
    return None


def _shape_fits(value: Any, kind: Any) -> bool:
    """Whether ``value`` is of ``kind``'s JSON type, its contents not looked at. JSON has
    one kind of number: a number may be written without a fraction, an integer with a zero
    one (``3.0``, as tools that rewrite a file may), but true is no number."""
    if typing.is_typeddict(kind):
        return isinstance(value, dict)
    base = typing.get_origin(kind) or kind
    if base in (types.UnionType, typing.Union):
        return any(_shape_fits(value, m) for m in typing.get_args(kind))
    if isinstance(value, bool):
        return base is bool
    if base is float:
        return isinstance(value, (int, float))
    if base is int and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, base)


def _expected(kind: Any) -> str:
    """A declared type in words: ``a number or null``."""
    if typing.get_origin(kind) in (types.UnionType, typing.Union):
        return " or ".join(_expected(m) for m in typing.get_args(kind))
    if typing.is_typeddict(kind):
        return "an object"
    return _WORDS.get(typing.get_origin(kind) or kind, str(kind))
