"""An MCP server over stdio that a test takes down, hangs, brings back and changes, written without the SDK.

Controlled by files in the folder ``$FLEET_CONTROL`` (read on every request):

- ``down``: exit at once when started (a server that cannot be reached).
- ``hang``: never answer ``tools/call`` (a hung server).
- ``tools``: a JSON list of tool names to offer (default ``["echo"]``); when it
  changes, the server sends ``notifications/tools/list_changed``.
- ``malformed``: answer ``tools/list`` with something that is not a tool list.
- ``calls`` (written): one line per ``tools/call`` received.
- ``leak``: refuse ``tools/list`` with an error echoing ``$FLEET_SECRET`` (the client must redact it).
- ``quiet``: change the tool list without telling (only a TTL refresh sees it).

Every tool returns ``{"tool": name, "args": arguments}`` as structured content.
Run as ``python tests/support/mcp_fleet_server.py``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

CONTROL = Path(os.environ["FLEET_CONTROL"])
_write = threading.Lock()


def send(body: dict) -> None:
    with _write:
        sys.stdout.write(json.dumps(body) + "\n")
        sys.stdout.flush()


def offered() -> list[str]:
    try:
        return json.loads((CONTROL / "tools").read_text())
    except (OSError, ValueError):
        return ["echo"]


def watch_tools() -> None:
    seen = offered()
    while True:
        time.sleep(0.1)
        now = offered()
        if now != seen:
            seen = now
            if not (CONTROL / "quiet").exists():
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})


def main() -> None:
    if (CONTROL / "down").exists():
        sys.exit(3)
    threading.Thread(target=watch_tools, daemon=True).start()
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message_id,
                    "result": {
                        "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                        "capabilities": {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "fleet", "version": "0"},
                    },
                }
            )
        elif method == "tools/list":
            if (CONTROL / "leak").exists():
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": message_id,
                        "error": {
                            "code": -32050,
                            "message": f"listing refused for token {os.environ.get('FLEET_SECRET')}",
                        },
                    }
                )
                continue
            if (CONTROL / "malformed").exists():
                send({"jsonrpc": "2.0", "id": message_id, "result": {"tools": "not a list", "nextCursor": 7}})
                continue
            tools = [
                {
                    "name": n,
                    "description": f"returns its arguments ({n})",
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                    "annotations": {"readOnlyHint": True},
                }
                for n in offered()
            ]
            send({"jsonrpc": "2.0", "id": message_id, "result": {"tools": tools}})
        elif method == "tools/call":
            with (CONTROL / "calls").open("a") as log:
                log.write(f"{params.get('name')}\n")
            if (CONTROL / "hang").exists():
                continue  # never answered
            name, arguments = params.get("name"), params.get("arguments") or {}
            if name not in offered():
                send({"jsonrpc": "2.0", "id": message_id, "error": {"code": -32602, "message": f"unknown tool {name}"}})
                continue
            value = {"tool": name, "args": arguments}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message_id,
                    "result": {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value},
                }
            )
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": message_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
