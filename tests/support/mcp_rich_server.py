"""An MCP server over stdio using the parts of the protocol beyond plain text, written without the SDK.

Resource links, images and audio, content annotations, progress
notifications during a long call, a tool that requires task augmentation,
and a result far larger than any context window. It echoes the client's
protocol version, so the newest fields (``execution.taskSupport``) survive.
Run as ``python tests/support/mcp_rich_server.py``.
"""

from __future__ import annotations

import base64
import json
import sys
import time

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(1200)).decode()
WAV = base64.b64encode(b"RIFF" + bytes(3000)).decode()
EMPTY = {"type": "object"}

TOOLS = [
    {"name": "link", "inputSchema": EMPTY},
    {"name": "picture", "inputSchema": EMPTY},
    {"name": "sound", "inputSchema": EMPTY},
    {"name": "slow", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "big", "inputSchema": {"type": "object", "properties": {"chars": {"type": "integer"}}}},
    {"name": "needs_task", "inputSchema": EMPTY, "execution": {"taskSupport": "required"}},
    {"name": "may_task", "inputSchema": EMPTY, "execution": {"taskSupport": "optional"}},
]


def send(body: dict) -> None:
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def call(name: str, arguments: dict, progress_token) -> dict | None:
    if name == "link":
        return {
            "content": [
                {"type": "text", "text": "found one report"},
                {
                    "type": "resource_link",
                    "uri": "file:///reports/q3.pdf",
                    "name": "q3.pdf",
                    "title": "Q3 report",
                    "description": "Quarterly revenue report",
                    "mimeType": "application/pdf",
                    "size": 48213,
                    "annotations": {"audience": ["user"], "priority": 0.9},
                },
            ]
        }
    if name == "picture":
        return {
            "content": [
                {
                    "type": "image",
                    "data": PNG,
                    "mimeType": "image/png",
                    "annotations": {"audience": ["assistant"], "priority": 0.5},
                }
            ]
        }
    if name == "sound":
        return {"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}
    if name == "slow":
        seconds = float(arguments.get("seconds", 3))
        steps = max(1, int(seconds / 0.25))
        for i in range(steps):
            time.sleep(seconds / steps)
            if progress_token is not None:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": progress_token,
                            "progress": i + 1,
                            "total": steps,
                            "message": f"step {i + 1} of {steps}",
                        },
                    }
                )
        return {"content": [{"type": "text", "text": "done"}], "structuredContent": {"steps": steps}}
    if name == "big":
        chars = int(arguments.get("chars", 1_000_000))
        return {"content": [{"type": "text", "text": "row " * (chars // 4)}]}
    if name == "may_task":
        return {"content": [{"type": "text", "text": "ran without a task"}]}
    return None


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue  # notifications
        params = message.get("params") or {}
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message_id,
                    "result": {
                        "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "rich", "version": "0"},
                    },
                }
            )
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": message_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            token = (params.get("_meta") or {}).get("progressToken")
            result = call(params.get("name"), params.get("arguments") or {}, token)
            if result is None:
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": message_id,
                        "error": {"code": -32602, "message": f"tool {params.get('name')} needs a task"},
                    }
                )
            else:
                send({"jsonrpc": "2.0", "id": message_id, "result": result})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": message_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
