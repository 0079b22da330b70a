"""MCP content blocks as the model reads them (tool mode) and as a program gets them (code mode).

Text stays text. Everything else keeps what the model can act on, without
bytes it cannot read: a resource link keeps its URI, name, title, description,
MIME type and size; an image or audio block becomes a placeholder naming its
MIME type and decoded size (tool mode) or a typed value with the same fields
(code mode); content annotations (audience, priority, last modified) are kept
in both.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from typing import Any


def _annotations(block: Any) -> dict[str, Any] | None:
    annotations = getattr(block, "annotations", None)
    if annotations is None:
        return None
    kept = annotations.model_dump(mode="json", exclude_none=True)
    return kept or None


def _decoded_size(data: str) -> int:
    try:
        return len(b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def block_value(block: Any) -> dict[str, Any]:
    """The typed value a program gets for one block (no binary data)."""
    import mcp_types as types  # loaded by the connection the block came over (sdk.py)

    out: dict[str, Any]
    if isinstance(block, types.TextContent):
        out = {"type": "text", "text": block.text}
    elif isinstance(block, types.ResourceLink):
        out = {
            "type": "resource_link",
            "uri": str(block.uri),
            "name": block.name,
            "title": block.title,
            "description": block.description,
            "mime_type": block.mime_type,
            "size": block.size,
        }
    elif isinstance(block, (types.ImageContent, types.AudioContent)):
        out = {"type": block.type, "mime_type": block.mime_type, "size_bytes": _decoded_size(block.data)}
    elif isinstance(block, types.EmbeddedResource):
        resource = block.resource
        text = getattr(resource, "text", None)
        out = {"type": "resource", "uri": str(resource.uri), "mime_type": resource.mime_type}
        if text is not None:
            out["text"] = text
        else:
            out["size_bytes"] = _decoded_size(getattr(resource, "blob", "") or "")
    else:
        out = {"type": getattr(block, "type", type(block).__name__)}
    annotations = _annotations(block)
    if annotations:
        out["annotations"] = annotations
    return {k: v for k, v in out.items() if v is not None}


def _annotation_note(annotations: dict[str, Any] | None) -> str:
    if not annotations:
        return ""
    parts = []
    if annotations.get("audience"):
        parts.append("for " + " and ".join(annotations["audience"]))
    if "priority" in annotations:
        parts.append(f"priority {annotations['priority']}")
    if annotations.get("lastModified"):
        parts.append(f"last modified {annotations['lastModified']}")
    return "; " + ", ".join(parts) if parts else ""


def block_text(block: Any, *, annotate_text: bool) -> str:
    """What the model reads for one block."""
    value = block_value(block)
    note = _annotation_note(value.get("annotations"))
    kind = value["type"]
    if kind == "text":
        return f"[{note[2:]}] {value['text']}" if annotate_text and note else value["text"]
    if kind == "resource_link":
        label = value.get("title") or value["name"]
        details = ", ".join(
            str(x) for x in (value.get("mime_type"), f"{value['size']} bytes" if "size" in value else None) if x
        )
        about = f": {value['description']}" if value.get("description") else ""
        shown = f" {details}" if details else ""
        return f"[resource link {label!r} ({value['name']}) <{value['uri']}>{shown}{about}{note}]"
    if kind in ("image", "audio"):
        return f"[{kind} {value['mime_type']}, {value['size_bytes']} bytes, not shown{note}]"
    if kind == "resource":
        if "text" in value:
            text: str = value["text"]
            return text
        return (
            f"[resource <{value['uri']}> {value.get('mime_type') or ''}, {value['size_bytes']} bytes, not shown{note}]"
        )
    return f"[{kind} content, not shown{note}]"


def only_text(blocks: list[Any]) -> bool:
    import mcp_types as types

    return all(isinstance(b, types.TextContent) for b in blocks)
