"""The scripted model's replies leave in one TCP send, so a benchmark never measures Nagle.

Headers written in one send and the body in another, with Nagle on, hold the
body until the client ACKs the headers; a client with delayed ACKs waits
~40 ms for it on every kept-alive request.
"""

from __future__ import annotations

import json
import socket

from agentsteps.scripted_model import ScriptedModelServer


def test_headers_and_body_arrive_together_on_a_kept_alive_connection():
    with ScriptedModelServer({"default": {"content": "hello from the script"}}) as server:
        host, port = server.base_url.removeprefix("http://").split(":")
        body = json.dumps({"model": "scripted-2026-01-01", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        with socket.create_connection((host, int(port))) as sock:
            for _ in range(3):  # the first reply of a connection is never delayed by Nagle; later ones are
                sock.sendall(request)
                data = sock.recv(1 << 20)  # blocks until the reply starts; what came in the first packet
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                assert len(rest) == length, f"the body came in a later packet: {len(rest)} of {length} bytes"
                assert "hello from the script" in json.loads(rest)["choices"][0]["message"]["content"]
