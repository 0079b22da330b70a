"""A strict check of a request body against an SDK's own request ``TypedDict``.

pydantic ignores unknown TypedDict keys and validates ``Iterable`` lazily, so a
misspelt or removed field (``max_tokens`` on a type that dropped it) would pass.
This walks the type: every key must be declared, every required key present,
every value of a declared type (unions: any member; literals: one of the values).
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

from typing_extensions import NotRequired, Required, is_typeddict

_WRAPPERS = (
    {Required, NotRequired, typing.Required, typing.NotRequired, typing.ReadOnly}
    if hasattr(typing, "ReadOnly")
    else {Required, NotRequired, typing.Required, typing.NotRequired}
)


def problems(value: Any, tp: Any, path: str = "$") -> list[str]:
    origin = typing.get_origin(tp)
    if origin in _WRAPPERS or origin is typing.Annotated:
        return problems(value, typing.get_args(tp)[0], path)
    if tp is Any or tp is object:
        return []
    if isinstance(tp, typing.TypeAliasType if hasattr(typing, "TypeAliasType") else ()):  # pragma: no cover
        return problems(value, tp.__value__, path)
    if origin in (typing.Union, types.UnionType):
        options = [problems(value, member, path) for member in typing.get_args(tp)]
        return [] if any(not p for p in options) else min(options, key=len)
    if origin is typing.Literal:
        return [] if value in typing.get_args(tp) else [f"{path}: {value!r} not in {typing.get_args(tp)}"]
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected object {tp.__name__}"]
        hints = typing.get_type_hints(tp, include_extras=True)
        out = [f"{path}.{k}: not a field of {tp.__name__}" for k in value if k not in hints]
        out += [f"{path}.{k}: required by {tp.__name__}" for k in tp.__required_keys__ if k not in value]
        for key, item in value.items():
            if key in hints:
                out += problems(item, hints[key], f"{path}.{key}")
        return out
    if origin in (dict, collections.abc.Mapping) or tp is dict:
        return [] if isinstance(value, dict) else [f"{path}: expected object"]
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence) or (
        origin is not None and getattr(origin, "__name__", "") == "SequenceNotStr"
    ):
        if not isinstance(value, list):
            return [f"{path}: expected array"]
        (item_type,) = typing.get_args(tp) or (Any,)
        return [p for i, v in enumerate(value) for p in problems(v, item_type, f"{path}[{i}]")]
    if tp is float:
        return [] if isinstance(value, int | float) and not isinstance(value, bool) else [f"{path}: expected number"]
    if isinstance(tp, type):
        return [] if isinstance(value, tp) else [f"{path}: expected {tp.__name__}, got {type(value).__name__}"]
    return []
