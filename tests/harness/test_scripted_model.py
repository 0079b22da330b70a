"""The scripted model server, exercised over real HTTP on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from importlib import resources

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agentsteps.scripted_model import Script, ScriptedModelServer, bundled_script
from agentsteps.scripted_model.caching import PromptCache


@pytest.fixture(scope="module")
def server():
    with ScriptedModelServer() as s:
        yield s


def _chat(server: ScriptedModelServer, text: str, **extra) -> httpx.Response:
    body = {"model": "m-1", "messages": [{"role": "user", "content": text}], **extra}
    return httpx.post(f"{server.url_openai}/chat/completions", json=body, timeout=5)


def _messages(server: ScriptedModelServer, messages: list, **extra) -> httpx.Response:
    body = {"model": "m-1", "max_tokens": 100, "messages": messages, **extra}
    return httpx.post(f"{server.url_anthropic}/v1/messages", json=body, timeout=5)


def test_replies_are_consumed_in_order_then_default_answers(server):
    server.set_script({"replies": [{"content": "first"}, {"content": "second"}], "default": {"echo": True}})
    texts = [_chat(server, f"q{i}").json()["choices"][0]["message"]["content"] for i in range(3)]
    assert texts == ["first", "second", "echo: q2"]


def test_rule_with_times_fails_once_then_falls_through_to_the_next_rule(server):
    server.set_script(
        {
            "rules": [
                {
                    "match": {"contains": "hi"},
                    "times": 1,
                    "reply": {"fault": {"status": 429, "retry_after": 2, "message": "slow down"}},
                },
                {"match": {"contains": "hi"}, "reply": {"content": "hello"}},
            ]
        }
    )
    first, second = _chat(server, "hi"), _chat(server, "hi")
    assert first.status_code == 429
    assert first.headers["retry-after"] == "2"
    assert first.json()["error"]["message"] == "slow down"
    assert second.status_code == 200
    assert second.json()["choices"][0]["message"]["content"] == "hello"


def test_unmatched_request_gets_a_500_saying_no_rule_matched(server):
    server.set_script({"rules": [{"match": {"contains": "weather"}, "reply": {"content": "sunny"}}]})
    response = _chat(server, "something else")
    assert response.status_code == 500
    assert "no rule matched" in response.json()["error"]["message"]


def test_openai_reply_is_well_formed_with_tool_calls(server):
    server.set_script({"replies": [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}]})
    body = _chat(server, "weather?").json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["type"] == "function" and call["id"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_anthropic_reply_is_well_formed_and_maps_finish_reason(server):
    server.set_script(
        {
            "replies": [
                {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                {"content": "cut", "finish_reason": "length", "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
            ]
        }
    )
    first = _messages(server, [{"role": "user", "content": "weather?"}]).json()
    assert first["type"] == "message" and first["stop_reason"] == "tool_use"
    assert first["content"][0] == {
        "type": "tool_use",
        "id": first["content"][0]["id"],
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    second = _messages(server, [{"role": "user", "content": "again"}]).json()
    assert second["stop_reason"] == "max_tokens"
    assert second["usage"] == {"input_tokens": 7, "output_tokens": 3}


def test_tool_result_rule_matches_in_both_wire_formats(server):
    server.set_script(
        {"rules": [{"match": {"role": "tool", "tool_result_for": "get_weather"}, "reply": {"content": "done"}}]}
    )
    openai_messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    response = httpx.post(f"{server.url_openai}/chat/completions", json={"model": "m", "messages": openai_messages})
    assert response.json()["choices"][0]["message"]["content"] == "done"
    anthropic_messages = [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
    ]
    assert _messages(server, anthropic_messages).json()["content"][0]["text"] == "done"


def test_any_contains_and_regex_match(server):
    server.set_script(
        {
            "rules": [
                {"match": {"any_contains": "SYSTEM-MARK", "regex": r"^order #\d+$"}, "reply": {"content": "matched"}},
            ],
            "default": {"content": "fallback"},
        }
    )
    assert (
        _messages(server, [{"role": "user", "content": "order #12"}], system="SYSTEM-MARK").json()["content"][0]["text"]
        == "matched"
    )
    assert (
        _messages(server, [{"role": "user", "content": "order #x"}], system="SYSTEM-MARK").json()["content"][0]["text"]
        == "fallback"
    )


def test_api_key_is_enforced_and_never_echoed(server):
    server.set_script({"api_key": "sk-scripted-secret", "default": {"content": "ok"}})
    denied = _chat(server, "hi")
    assert denied.status_code == 401
    assert "sk-scripted-secret" not in denied.text
    allowed = httpx.post(
        f"{server.url_openai}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": "Bearer sk-scripted-secret"},
    )
    assert allowed.status_code == 200
    assert _messages(server, [{"role": "user", "content": "hi"}]).status_code == 401


def test_raw_body_is_sent_verbatim(server):
    server.set_script({"replies": [{"raw_body": "this is {not json"}]})
    response = _chat(server, "hi")
    assert response.status_code == 200
    assert response.text == "this is {not json"


def test_invalid_tool_arguments_string_is_sent_verbatim(server):
    server.set_script({"replies": [{"tool_calls": [{"name": "f", "arguments": '{"city": '}]}] * 2})
    call = _chat(server, "hi").json()["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["arguments"] == '{"city": '
    block = _messages(server, [{"role": "user", "content": "hi"}]).json()["content"][0]
    assert block["input"] == '{"city": '


def test_delay_holds_the_reply(server):
    server.set_script({"replies": [{"content": "late", "delay_seconds": 0.3}]})
    started = time.perf_counter()
    assert _chat(server, "hi").status_code == 200
    assert time.perf_counter() - started >= 0.3


def test_end_delays_ends_a_held_reply_and_a_streams_pauses_at_once_until_the_next_script(server):
    import threading

    server.set_script(
        {
            "replies": [{"content": "held", "delay_seconds": 30}],
            "default": {"content": "a long streamed answer", "stream": {"chunk_chars": 2, "delay_seconds": 5}},
        }
    )
    answers: list[httpx.Response] = []
    body = {"model": "m-1", "messages": [{"role": "user", "content": "hi"}]}
    url = f"{server.url_openai}/chat/completions"
    asking = threading.Thread(target=lambda: answers.append(httpx.post(url, json=body, timeout=30)))
    started = time.perf_counter()
    asking.start()
    while not server.requests:
        time.sleep(0.01)
    server.end_delays()
    asking.join(10)
    assert answers and answers[0].json()["choices"][0]["message"]["content"] == "held"
    with httpx.stream(
        "POST",
        f"{server.url_openai}/chat/completions",
        json={"model": "m-1", "messages": [{"role": "user", "content": "go"}], "stream": True},
        timeout=5,
    ) as streamed:
        assert "[DONE]" in "".join(streamed.iter_text())  # a dozen pauses of 5 s skipped
    assert time.perf_counter() - started < 10
    server.set_script({"replies": [{"content": "late", "delay_seconds": 0.3}]})  # a new script waits again
    again = time.perf_counter()
    assert _chat(server, "hi").status_code == 200 and time.perf_counter() - again >= 0.3


def test_requests_are_recorded_with_headers_and_body(server):
    server.set_script({"default": {"content": "ok"}})
    httpx.post(
        f"{server.url_anthropic}/v1/messages",
        headers={"x-api-key": "k1"},
        json={"model": "m", "messages": [{"role": "user", "content": "hello"}]},
    )
    [record] = server.requests
    assert record.path == "/v1/messages" and record.wire == "anthropic"
    assert record.headers["x-api-key"] == "k1"
    assert record.body["messages"][0]["content"] == "hello"


def test_unknown_route_is_a_404(server):
    assert httpx.post(f"{server.base_url}/v2/nothing", json={}).status_code == 404


def test_script_rejects_unknown_keys_and_conflicting_text_sources():
    with pytest.raises(ValidationError):
        Script.model_validate({"replys": []})
    with pytest.raises(ValidationError):
        Script.model_validate({"replies": [{"content": "a", "json": {"b": 1}}]})


def test_bundled_scripts_are_installed_and_valid():
    scripts = resources.files("agentsteps.scripted_model") / "scripts"
    assert bundled_script("weather.json").is_file()
    names = sorted(p.name for p in scripts.iterdir() if p.name.endswith(".json"))
    assert "weather.json" in names
    for name in names:
        Script.model_validate_json((scripts / name).read_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serves_a_script_file_until_interrupted(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": {"content": "from the cli"}}))
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentsteps.scripted_model", "--script", str(script), "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        assert f"OPENAI_BASE_URL=http://127.0.0.1:{port}/v1" in lines[1]
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            timeout=5,
        )
        assert response.json()["choices"][0]["message"]["content"] == "from the cli"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# No floats or booleans: the cache compares messages as values, so 1, 1.0 and True are one message.
_JSON = st.recursive(
    st.none() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


class _EveryPrefixEncoded:
    """The cache's definition: every prefix encoded whole as sorted JSON, and remembered."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def openai(self, items: list) -> int:
        prefixes = [json.dumps(items[: i + 1], sort_keys=True) for i in range(len(items))]
        hit = max((i for i, p in enumerate(prefixes) if p in self.seen), default=-1)
        self.seen.update(prefixes)
        return len(prefixes[hit]) // 4 if hit >= 0 else 0


@given(st.lists(_JSON, max_size=10), st.lists(st.tuples(st.integers(0, 10), st.lists(_JSON, max_size=3)), max_size=6))
def test_prompt_cache_reads_what_encoding_every_prefix_whole_would(base, requests):
    """Requests that share prefixes of one conversation (and add their own turns) read the tokens
    of the longest prefix an earlier request had, counted as its sorted JSON, as the cache once did."""
    cache, reference = PromptCache(), _EveryPrefixEncoded()
    for keep, extra in requests:
        messages = base[:keep] + extra
        assert cache.openai({"messages": messages}) == reference.openai(messages)


def test_prompt_cache_reads_the_same_when_hundreds_of_conversations_branch_off_one_prompt():
    """Past a few branches the items after a prefix are looked up by value, not compared in turn."""
    cache, reference = PromptCache(), _EveryPrefixEncoded()
    system = {"role": "system", "content": "be brief"}
    for step in range(3):
        for run in range(40):
            messages = [system, {"role": "user", "content": f"run {run}"}]
            messages += [{"content": f"answer {i}", "role": "assistant", "n": [i, {"run": run}]} for i in range(step)]
            assert cache.openai({"messages": messages}) == reference.openai(messages)
            # The same conversation with its keys in another order is the same prompt.
            reordered = [dict(reversed(list(m.items()))) for m in messages]
            assert cache.openai({"messages": reordered}) == reference.openai(messages)


def test_fill_answers_with_the_named_groups_of_the_rule_regex(server):
    server.set_script(
        {
            "rules": [
                {
                    "match": {"regex": r"refund (?P<order>[A-Z]+-\d+)"},
                    "reply": {
                        "fill": True,
                        "tool_calls": [
                            {"name": "refund_order", "arguments": {"order_id": "{order}", "note": "for {order}"}}
                        ],
                    },
                },
                {
                    "match": {"regex": r"hello (?P<who>\w+)"},
                    "reply": {"fill": True, "json": {"greeting": ["hi {who}"]}},
                },
            ]
        }
    )
    call = _chat(server, "please refund A-1001 today").json()["choices"][0]["message"]["tool_calls"][0]
    greeting = _chat(server, "hello ada").json()["choices"][0]["message"]["content"]

    assert json.loads(call["function"]["arguments"]) == {"order_id": "A-1001", "note": "for A-1001"}
    assert json.loads(greeting) == {"greeting": ["hi ada"]}


def test_without_fill_braces_are_sent_verbatim(server):
    server.set_script({"rules": [{"match": {"regex": r"(?P<x>\w+)"}, "reply": {"content": "{x}"}}]})
    assert _chat(server, "word").json()["choices"][0]["message"]["content"] == "{x}"
