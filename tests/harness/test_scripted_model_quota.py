"""The scripted model's provider quotas (``Script.quotas``, ``--quota``), over real HTTP on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from pydantic import ValidationError

from agentsteps.scripted_model import Script, ScriptedModelServer
from agentsteps.scripted_model.quota import QuotaGate, Refusal, Ticket
from agentsteps.scripted_model.script import Quota


def _chat(url: str, text: str = "hi", model: str = "m-1", **extra) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": text}], **extra}
    return httpx.post(f"{url}/chat/completions", json=body, timeout=10)


def _messages(url: str, text: str = "hi", max_tokens: int = 10) -> httpx.Response:
    body = {"model": "m-1", "max_tokens": max_tokens, "messages": [{"role": "user", "content": text}]}
    return httpx.post(f"{url}/v1/messages", json=body, timeout=10)


def _script(quota: dict, **extra) -> dict:
    return {"default": {"content": "ok"}, "quotas": {"m-1": quota}, **extra}


def test_calls_under_the_quota_all_succeed_and_their_tokens_are_counted():
    with ScriptedModelServer(
        _script({"requests_per_minute": 10, "tokens_per_minute": 10_000, "concurrent_requests": 4})
    ) as server:
        answers = [_chat(server.url_openai, f"question {i}") for i in range(10)]
        assert [a.status_code for a in answers] == [200] * 10
        stats = server.stats()
    usage = [a.json()["usage"] for a in answers]
    assert stats["http_429"] == 0 and stats["status"] == {"200": 10}
    assert stats["input_tokens"] == sum(u["prompt_tokens"] for u in usage)
    assert stats["output_tokens"] == sum(u["completion_tokens"] for u in usage)
    assert stats["quotas"]["m-1"]["window"]["requests"] == 10


def test_beyond_requests_per_minute_a_429_with_retry_after_in_each_wire_format():
    script = _script(
        {"requests_per_minute": 2}, replies=[{"content": "first"}, {"content": "second"}, {"content": "third"}]
    )
    with ScriptedModelServer(script) as server:
        assert [_chat(server.url_openai).status_code for _ in range(2)] == [200, 200]
        openai, anthropic = _chat(server.url_openai), _messages(server.url_anthropic)
        stats = server.stats()
        server_replies_left = _chat(server.url_openai)  # still refused: the window is a minute
    assert openai.status_code == anthropic.status_code == 429
    for response in (openai, anthropic):
        assert 1 <= int(response.headers["retry-after"]) <= 60
        assert 0 < int(response.headers["retry-after-ms"]) <= 60_000
    # The same error shapes as an injected 429 fault.
    assert openai.json()["error"]["type"] == "rate_limit_error"
    assert "requests per min (RPM): limit 2" in openai.json()["error"]["message"]
    assert anthropic.json()["type"] == "error" and anthropic.json()["error"]["type"] == "rate_limit_error"
    assert stats["http_429"] == 2 and stats["quota_429"] == {"requests_per_minute": 2}
    assert stats["models"]["m-1"] == {
        "requests": 4,
        "http_429": 2,
        "input_tokens": stats["input_tokens"],
        "output_tokens": stats["output_tokens"],
    }
    assert server_replies_left.status_code == 429


def test_a_refused_request_spends_no_scripted_reply():
    script = _script(
        {"requests_per_minute": 1, "window_seconds": 2.0}, replies=[{"content": "first"}, {"content": "second"}]
    )
    with ScriptedModelServer(script) as server:
        assert _chat(server.url_openai).json()["choices"][0]["message"]["content"] == "first"
        refused = _chat(server.url_openai)
        time.sleep(int(refused.headers["retry-after-ms"]) / 1000)
        after = _chat(server.url_openai)
    assert refused.status_code == 429
    assert after.json()["choices"][0]["message"]["content"] == "second"


@pytest.mark.parametrize("window", ["sliding", "fixed"])
def test_the_window_recovers_after_retry_after(window):
    # Two seconds stand for the minute: long enough for four requests on a loaded machine.
    with ScriptedModelServer(_script({"requests_per_minute": 3, "window": window, "window_seconds": 2.0})) as server:
        statuses = [_chat(server.url_openai).status_code for _ in range(4)]
        refused = _chat(server.url_openai)
        time.sleep(int(refused.headers["retry-after-ms"]) / 1000 + 0.02)
        retried = _chat(server.url_openai).status_code  # what Retry-After promised: room for one more
        time.sleep(2.05)
        recovered = [_chat(server.url_openai).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert refused.status_code == 429
    assert retried == 200
    assert recovered == [200, 200, 200, 429]  # a whole window later, the whole quota again


def test_tokens_are_reserved_up_front_then_settled_to_the_usage_sent():
    # 60 reserved for max_tokens each: two requests would not fit 100 unless the first
    # were settled to what it really used (a short reply).
    with ScriptedModelServer(_script({"tokens_per_minute": 100})) as server:
        first = _chat(server.url_openai, max_tokens=60)
        second = _chat(server.url_openai, max_tokens=60)
        window = server.stats()["quotas"]["m-1"]["window"]
        too_large = _chat(server.url_openai, max_tokens=200)
    assert first.status_code == second.status_code == 200
    used = sum(r.json()["usage"]["total_tokens"] for r in (first, second))
    assert window["input_tokens"] + window["output_tokens"] == used < 100
    assert too_large.status_code == 429
    assert (
        "Request too large for m-1 on tokens per min (TPM): limit 100, requested"
        in too_large.json()["error"]["message"]
    )


def test_output_tokens_per_minute_counts_the_completion():
    with ScriptedModelServer(
        {"default": {"content": "x" * 400}, "quotas": {"*": {"output_tokens_per_minute": 150}}}
    ) as server:
        answers = [_chat(server.url_openai) for _ in range(3)]
    # Without max_tokens a request is admitted while a token is left: the second overruns, as at a provider.
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].json()["usage"]["completion_tokens"] == 100
    assert "output tokens per min (OTPM): limit 150, used 200, requested 1" in answers[2].json()["error"]["message"]


def test_concurrent_requests_beyond_the_limit_are_refused_while_the_others_run():
    with ScriptedModelServer(
        _script({"concurrent_requests": 2}, default={"content": "slow", "delay_seconds": 1.5})
    ) as server:
        with ThreadPoolExecutor(4) as pool:
            statuses = sorted(pool.map(lambda _: _chat(server.url_openai).status_code, range(4)))
        stats = server.stats()
        afterwards = _chat(server.url_openai)
    assert statuses == [200, 200, 429, 429]
    assert stats["quota_429"] == {"concurrent_requests": 2}
    assert stats["quotas"]["m-1"]["window"]["in_flight"] == 0
    assert afterwards.status_code == 200


def test_each_model_has_its_own_quota_and_the_star_counts_every_other_model_apart():
    script = {
        "default": {"content": "ok"},
        "quotas": {"m-1": {"requests_per_minute": 1}, "*": {"requests_per_minute": 2}},
    }
    with ScriptedModelServer(script) as server:
        m1 = [_chat(server.url_openai, model="m-1").status_code for _ in range(2)]
        m2 = [_chat(server.url_openai, model="m-2").status_code for _ in range(3)]
        m3 = [_chat(server.url_openai, model="m-3").status_code for _ in range(2)]
    assert m1 == [200, 429]
    assert m2 == [200, 200, 429]
    assert m3 == [200, 200]


def test_without_a_quota_nothing_is_refused_and_tokens_are_still_counted():
    with ScriptedModelServer({"default": {"content": "ok"}}) as server:
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda i: _chat(server.url_openai, f"q{i}").status_code, range(40)))
        stats = httpx.get(f"{server.base_url}/stats").json()
    assert statuses == [200] * 40
    assert stats["requests"] == 40 and stats["http_429"] == 0 and stats["quotas"] == {}
    assert stats["output_tokens"] == 40  # "ok" is one token


def test_injected_429_faults_are_counted_with_the_quota_ones():
    script = {
        "rules": [{"times": 1, "reply": {"fault": {"status": 429, "retry_after": 1}}}],
        "default": {"content": "ok"},
    }
    with ScriptedModelServer(script) as server:
        assert [_chat(server.url_openai).status_code for _ in range(2)] == [429, 200]
        stats = server.stats()
    assert stats["http_429"] == 1 and stats["quota_429"] == {}


@pytest.mark.parametrize(
    "quota, words",
    [
        ({"requests_per_minute": 0}, "greater than or equal to 1"),
        ({"requests_per_minute": -5}, "greater than or equal to 1"),
        ({"requests_per_minute": True}, "valid integer"),
        ({"tokens_per_minute": "1000"}, "valid integer"),
        ({"requests_per_minute": 1.5}, "valid integer"),
        ({"requests_per_minute": 10, "window": "hourly"}, "'sliding' or 'fixed'"),
        ({"requests_per_minute": 10, "window_seconds": 0}, "greater than 0"),
        ({"requests_per_minute": 10, "rmp": 10}, "Extra inputs are not permitted"),
        ({}, "a quota needs at least one limit"),
        ({"window": "fixed"}, "a quota needs at least one limit"),
    ],
)
def test_a_malformed_quota_in_a_script_is_a_clear_error(quota, words):
    with pytest.raises(ValidationError, match=words):
        Script.model_validate({"quotas": {"m-1": quota}})
    with pytest.raises(ValidationError):
        ScriptedModelServer({"quotas": {"m-1": quota}})


def test_quotas_must_be_an_object_of_quotas():
    for bad in ([{"requests_per_minute": 1}], {"m-1": 60}, "rpm=60"):
        with pytest.raises(ValidationError):
            Script.model_validate({"quotas": bad})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(script, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agentsteps.scripted_model", "--script", str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_command_line_quota_is_enforced_and_stats_are_served(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": {"content": "ok"}, "quotas": {"m-1": {"requests_per_minute": 100}}}))
    port = _free_port()
    proc = _cli(script, "--port", str(port), "--quota", "model=m-1,rpm=2,concurrency=4,window=fixed")
    try:
        lines = [proc.stdout.readline() for _ in range(4)]
        assert "quota m-1: {'requests_per_minute': 2, 'concurrent_requests': 4, 'window': 'fixed'" in lines[3]
        url = f"http://127.0.0.1:{port}/v1"
        statuses = [_chat(url).status_code for _ in range(3)]
        stats = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=5).json()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert statuses == [200, 200, 429]  # the command line replaced the script's quota for m-1
    assert stats["http_429"] == 1 and stats["quota_429"] == {"requests_per_minute": 1}


@pytest.mark.parametrize(
    "spec, words",
    [
        ("rpm=abc", "rpm='abc' is not a number"),
        ("rpm=0", "greater than or equal to 1"),
        ("rpm", "'rpm' is not key=value"),
        ("rpm=10,bogus=1", "unknown quota key 'bogus'"),
        ("rpm=10,window=weekly", "'sliding' or 'fixed'"),
        ("model=m-1", "a quota needs at least one limit"),
        ("rpm=1,requests_per_minute=2", "given twice"),
    ],
)
def test_a_malformed_quota_option_is_a_clear_error_at_start(tmp_path, spec, words):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": {"content": "ok"}}))
    proc = _cli(script, "--port", str(_free_port()), "--quota", spec)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "argument --quota" in err and words in err
    assert "Traceback" not in err


def test_a_sliding_window_retry_after_is_when_the_request_first_fits():
    """With a clock the test turns: the wait is exactly until enough tokens have left the window."""
    now = [1000.0]
    gate = QuotaGate({"m": Quota(tokens_per_minute=100, window_seconds=60)}, clock=lambda: now[0])
    for at, tokens in [(1000.0, 40), (1010.0, 30), (1020.0, 20)]:
        now[0] = at
        ticket = gate.admit("m", tokens, 0)
        assert isinstance(ticket, Ticket)
        gate.release(ticket)
    now[0] = 1030.0
    refused = gate.admit("m", 45, 0)  # 90 used: 40 must leave (at 1060), 30 more would (1070)
    assert isinstance(refused, Refusal) and refused.limit == "tokens_per_minute"
    assert refused.retry_after == pytest.approx(30.0)
    now[0] = 1060.0  # the 40 has left: 50 used
    assert isinstance(gate.admit("m", 45, 0), Ticket)
    again = gate.admit("m", 45, 0)  # 95 used: the 30 (at 1070) and the 20 (at 1080) must leave
    assert isinstance(again, Refusal) and again.retry_after == pytest.approx(20.0)


def test_agentsteps_scripted_model_takes_the_same_quota_option():
    from agentsteps.cli.main import _parser

    args = _parser().parse_args(
        ["scripted-model", "--script", "s.json", "--quota", "model=m-1,tpm=500", "--quota", "concurrency=2"]
    )
    assert args.quota == [("m-1", Quota(tokens_per_minute=500)), ("*", Quota(concurrent_requests=2))]
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["scripted-model", "--script", "s.json", "--quota", "tpm=-1"])
    assert exited.value.code == 2
