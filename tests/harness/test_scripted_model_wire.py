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
        request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with socket.create_connection((host, int(port))) as sock:
            for _ in range(3):  # the first reply of a connection is never delayed by Nagle; later ones are
                sock.sendall(request)
                data = sock.recv(1 << 20)  # blocks until the reply starts; what came in the first packet
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(
                    next(
                        line.split(b":")[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                )
                assert len(rest) == length, f"the body came in a later packet: {len(rest)} of {length} bytes"
                assert "hello from the script" in json.loads(rest)["choices"][0]["message"]["content"]


def _events(text: str) -> list[tuple[str | None, str]]:
    out = []
    for block in text.strip().split("\n\n"):
        event = next((line[7:] for line in block.split("\n") if line.startswith("event: ")), None)
        data = next(line[6:] for line in block.split("\n") if line.startswith("data: "))
        out.append((event, data))
    return out


def test_a_stream_request_gets_server_sent_events_in_each_wire_format():
    import httpx

    reply = {
        "content": "sunny all day",
        "stream": {"chunk_chars": 5},
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Lisbon"}}],
    }
    with ScriptedModelServer({"default": reply}) as server:
        ask = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        openai = httpx.post(f"{server.url_openai}/chat/completions", json=ask)
        with_usage = httpx.post(
            f"{server.url_openai}/chat/completions", json={**ask, "stream_options": {"include_usage": True}}
        )
        anthropic = httpx.post(f"{server.url_anthropic}/v1/messages", json={**ask, "max_tokens": 50})

    assert openai.headers["content-type"] == "text/event-stream"
    chunks = [json.loads(d) for _, d in _events(openai.text)[:-1]]
    assert _events(openai.text)[-1][1] == "[DONE]"
    assert [c["choices"][0]["delta"].get("content") for c in chunks][1:4] == ["sunny", " all ", "day"]
    call = chunks[4]["choices"][0]["delta"]["tool_calls"][0]
    assert (call["function"]["name"], call["function"]["arguments"]) == ("get_weather", "")
    args = "".join(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in chunks[5:-1])
    assert args == '{"city": "Lisbon"}' and chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all("usage" not in c for c in chunks)  # only asked for with stream_options.include_usage
    last = json.loads(_events(with_usage.text)[-2][1])
    assert last["choices"] == [] and last["usage"]["total_tokens"] > 0

    names = [e for e, _ in _events(anthropic.text)]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == 2 == names.count("content_block_stop")
    deltas = [json.loads(d)["delta"] for e, d in _events(anthropic.text) if e == "content_block_delta"]
    assert "".join(d["text"] for d in deltas if d["type"] == "text_delta") == "sunny all day"
    assert "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta") == '{"city": "Lisbon"}'
    assert json.loads(_events(anthropic.text)[-2][1])["usage"]["output_tokens"] > 0
