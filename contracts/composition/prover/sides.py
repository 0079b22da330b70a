"""One side of an edge: a root schema, its validators, and ``$ref`` resolution inside it."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import referencing
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from ...json_schema import describe
from .results import _R, _unproven
from .vocabulary import _ANNOTATIONS, _validation_keys


class _Unresolvable(Exception):
    pass


class _Side:
    def __init__(self, root: dict[str, Any] | bool) -> None:
        self.root = root
        cls = validator_for(root, default=Draft202012Validator) if isinstance(root, dict) else Draft202012Validator
        empty = referencing.Registry()
        self._loose: Validator = cls(root, registry=empty)
        self._strict: Validator = cls(root, registry=empty, format_checker=cls.FORMAT_CHECKER)

    def valid(self, node: Any, value: Any, *, strict: bool) -> bool | None:
        """Does ``value`` validate against ``node`` (a subschema of this root)? ``None``: cannot tell."""
        try:
            valid: bool = (self._strict if strict else self._loose).evolve(schema=node).is_valid(value)
            return valid
        except RecursionError:
            return None
        except Exception:  # noqa: BLE001 - unresolvable refs, bad regexes: cannot tell, never crash
            return None

    def resolve(self, ref: str) -> Any:
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            raise _Unresolvable(ref)
        node: Any = self.root
        for raw in ref[2:].split("/"):
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise _Unresolvable(ref)
        return node


def _deref(side: _Side, node: Any, chain: tuple[str, ...], path: str) -> tuple[Any, tuple[str, ...], _R | None]:
    """Follow ``$ref`` to a schema node; a ref already on ``chain`` is recursion (unproven)."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        rest = {k: v for k, v in node.items() if k != "$ref" and k not in _ANNOTATIONS}
        if _validation_keys(rest):
            # Draft 2020-12: $ref beside other keywords is a conjunction.
            return {"allOf": [{"$ref": ref}, rest]}, chain, None
        if not isinstance(ref, str):
            return node, chain, _unproven(path, f"$ref {describe(ref)} is not a string")
        if ref in chain:
            return node, chain, _unproven(path, f"recursive $ref {ref!r}: recursion is not analysed statically")
        try:
            node = side.resolve(ref)
        except _Unresolvable:
            return node, chain, _unproven(path, f"$ref {ref!r} is not a local JSON pointer into the schema")
        chain = (*chain, ref)
    return node, chain, None
