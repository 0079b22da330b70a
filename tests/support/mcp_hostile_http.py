"""The hostile MCP server of ``mcp_hostile_server.py``, over streamable HTTP, written without the SDK.

Same tools, same misbehaviour, so each failure mode can be checked on both
transports. It answers every POST with one ``application/json`` body and
issues no session id, which the spec allows and which keeps the client from
opening a GET stream. Requests are served on threads, so one hanging call
does not stop the others; ``die`` ends the whole process mid-request, as a
crashing server would.

Run as ``python tests/support/mcp_hostile_http.py PORT``.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mcp_hostile_server import TOOLS, call


def answer(message: dict) -> dict | None:
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        return None  # notifications
    if method == "initialize":
        result = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-http", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        params = message.get("params") or {}
        result = call(params.get("name"), params.get("arguments") or {})
        if result is None:
            return {
                "jsonrpc": "2.0",
                "id": message_id,
                "error": {"code": -32602, "message": f"unknown tool {params.get('name')}"},
            }
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": f"method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": message_id, "result": result}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        reply = answer(json.loads(body))
        if reply is None:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    do_DELETE = do_GET

    def log_message(self, *args) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()
