"""A deliberately misbehaving MCP server over stdio, written without the SDK.

It speaks just enough JSON-RPC (legacy ``initialize`` handshake) to be
connected to, then answers each tool in a different wrong way: output that
breaks its schema, results that are not valid MCP, errors, silence, death.
Run as ``python tests/support/mcp_hostile_server.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

COUNT_SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}

TOOLS = [
    {"name": "good_output", "inputSchema": {"type": "object"}, "outputSchema": COUNT_SCHEMA},
    {"name": "bad_output", "inputSchema": {"type": "object"}, "outputSchema": COUNT_SCHEMA},
    {"name": "text_only_with_schema", "inputSchema": {"type": "object"}, "outputSchema": COUNT_SCHEMA},
    {"name": "garbage", "inputSchema": {"type": "object"}},
    {"name": "text_json", "inputSchema": {"type": "object"}},
    {"name": "plain_text", "inputSchema": {"type": "object"}},
    {"name": "fails", "inputSchema": {"type": "object"}},
    {"name": "hang", "inputSchema": {"type": "object"}},
    {"name": "die", "inputSchema": {"type": "object"}},
    {"name": "die_once", "inputSchema": {"type": "object"}},
    {"name": "echo_secret", "inputSchema": {"type": "object"}},
    {
        "name": "write",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}, "idempotency_key": {"type": "string"}},
            "required": ["text", "idempotency_key"],
        },
    },
    {"name": "bad name!", "inputSchema": {"type": "object"}},
    # Count each call in $HOSTILE_LEDGER.<name>, and die on the first: a write with no key, and a read.
    {"name": "charge_dies_once", "inputSchema": {"type": "object", "properties": {"cents": {"type": "integer"}}}},
    {"name": "read_dies_once", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    # A tracker that answers in prose.
    {
        "name": "list_issues",
        "inputSchema": {
            "type": "object",
            "properties": {
                "project": {"type": "string"},
                "state": {"type": "string"},
                "updated_before": {"type": "string"},
                "limit": {"type": "integer"},
                "cursor": {"type": ["string", "null"]},
            },
        },
    },
    {"name": "get_issue", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}},
]


def text(value: str) -> list[dict]:
    return [{"type": "text", "text": value}]


def call(name: str, arguments: dict) -> dict | None:
    if name == "good_output":
        return {"content": text('{"count": 3}'), "structuredContent": {"count": 3}}
    if name == "bad_output":
        return {"content": text('{"count": "many"}'), "structuredContent": {"count": "many"}}
    if name == "text_only_with_schema":
        return {"content": text("three")}
    if name == "garbage":
        return {"content": "not-a-list", "isError": "perhaps"}
    if name == "text_json":
        return {"content": text('{"a": [1, 2]}')}
    if name == "plain_text":
        return {"content": text("hello there")}
    if name == "fails":
        return {"content": text("boom: the widget is on fire"), "isError": True}
    if name == "hang":
        time.sleep(3600)
    if name == "die":
        os._exit(3)
    if name == "die_once":
        marker = Path(os.environ["HOSTILE_MARKER"])
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(3)
        return {"content": text("survived"), "structuredContent": {"pid": os.getpid()}}
    if name == "echo_secret":
        return {
            "content": text(f"my token is {os.environ.get('HOSTILE_TOKEN', '')}"),
            "structuredContent": {"token": os.environ.get("HOSTILE_TOKEN", "")},
        }
    if name in ("charge_dies_once", "read_dies_once"):
        ledger = Path(f"{os.environ['HOSTILE_LEDGER']}.{name}")
        calls = ledger.read_text().count("\n") if ledger.exists() else 0
        with ledger.open("a") as out:
            out.write(json.dumps(arguments) + "\n")
        if calls == 0:
            os._exit(3)
        return {"content": text(f"done, call {calls + 1}"), "structuredContent": {"call": calls + 1}}
    if name in ("list_issues", "get_issue"):
        return {"content": text("Sure! Here are the issues you asked for: PROJ-1 and PROJ-2.")}
    if name == "write":
        return {"content": text(json.dumps(arguments)), "structuredContent": arguments}
    return None


def reply(message_id, result=None, error=None) -> None:
    body = {"jsonrpc": "2.0", "id": message_id}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue  # notifications
        if method == "initialize":
            reply(
                message_id,
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "0"},
                },
            )
        elif method == "tools/list":
            reply(message_id, {"tools": TOOLS})
        elif method == "tools/call":
            params = message.get("params") or {}
            result = call(params.get("name"), params.get("arguments") or {})
            if result is None:
                reply(message_id, error={"code": -32602, "message": f"unknown tool {params.get('name')}"})
            else:
                reply(message_id, result)
        elif method == "ping":
            reply(message_id, {})
        else:
            reply(message_id, error={"code": -32601, "message": f"method not found: {method}"})


if __name__ == "__main__":
    main()
