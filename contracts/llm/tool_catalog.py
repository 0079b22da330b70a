"""A run's tool schemas stored once in the payload store, named by later ``llm.call`` requests.

A one-shot tool-mode run's first model call resolves the run's tool names on
the worker (``LLMRequest.tool_names``). That call also stores the schemas it
resolved as one catalog blob bound to the run (its owner) and returns a
``ToolCatalogRef``; every later call of the run names the catalog instead of
carrying the schemas (about 1.6 KB of history per call with two tools).
A session does the same once for its whole life: its first call carrying
its schemas asks for them to be stored (``LLMRequest.store_tools``), the
catalog is bound to the session (the owner of its conversation, the same
across continue-as-new), and the session carries the ref from turn to turn
and across continue-as-new (``SessionCarry.tools_ref``).

The catalog is its own stored object, not a field of the conversation
segment the same call stores: a context policy's compaction starts a new
conversation chain (the catalog must outlive it), a worker with the chain's
head cached would otherwise still walk to the first segment for the tools,
and one small blob per run is read and verified on its own. Both are written
in the same store call, overlapped with the provider call.

The encoding keeps each schema as given (no key sorting): the tools a
provider receives from a catalog are byte for byte the ones it received
before, and the same schemas for the same owner always have the same address.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from pydantic import BaseModel, Field, ValidationError

from .tools import ToolSchema

CATALOG_VERSION = 1
_KIND = "agentsteps.tool_catalog"


class ForeignCatalogError(ValueError):
    """A catalog bound to another run or session than the one naming it."""


class ToolCatalogRef(BaseModel):
    """A stored tool catalog: what ``llm.call`` reads the run's schemas from."""

    sha256: str
    """Digest of the catalog's bytes."""
    count: int = Field(ge=0)
    """How many schemas it holds."""
    claim: dict[str, str] = Field(default_factory=dict)
    """The payload store's claim for the blob."""


def encode_catalog(tools: Sequence[ToolSchema], owner: str) -> bytes:
    """The catalog's bytes: deterministic, bound to ``owner`` (never empty: an unbound catalog would load
    in any run)."""
    if not owner:
        raise ValueError("a tool catalog is always bound to its run")
    body = {"v": CATALOG_VERSION, "kind": _KIND, "owner": owner, "tools": [t.model_dump(mode="json") for t in tools]}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def catalog_ref(data: bytes, count: int, claim: dict[str, str]) -> ToolCatalogRef:
    return ToolCatalogRef(sha256=hashlib.sha256(data).hexdigest(), count=count, claim=claim)


def decode_catalog(ref: ToolCatalogRef, data: bytes, owner: str) -> list[ToolSchema]:
    """The schemas ``ref`` names; ``ValueError`` when the bytes are not what it names or are malformed,
    ``ForeignCatalogError`` when the catalog is bound to another owner than ``owner``."""
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ValueError(f"tool catalog {ref.sha256[:12]} does not match its digest")
    try:
        body = json.loads(data)
    except ValueError:
        raise ValueError(f"tool catalog {ref.sha256[:12]} is not JSON") from None
    if not isinstance(body, dict) or body.get("v") != CATALOG_VERSION or body.get("kind") != _KIND:
        raise ValueError(f"tool catalog {ref.sha256[:12]} is malformed")
    if not owner or body.get("owner") != owner:
        raise ForeignCatalogError(f"tool catalog {ref.sha256[:12]} belongs to another run or session")
    tools = body.get("tools")
    if not isinstance(tools, list) or len(tools) != ref.count:
        raise ValueError(f"tool catalog {ref.sha256[:12]} does not hold the {ref.count} schemas its ref names")
    try:
        return [ToolSchema.model_validate(t) for t in tools]
    except ValidationError as exc:
        raise ValueError(
            f"tool catalog {ref.sha256[:12]} holds an invalid schema ({exc.error_count()} errors)"
        ) from None


__all__ = ["ForeignCatalogError", "ToolCatalogRef", "catalog_ref", "decode_catalog", "encode_catalog"]
