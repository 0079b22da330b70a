"""``agentsteps chat`` and ``agentsteps session`` as a user runs them (a separate process, stdin scripted)."""

from __future__ import annotations

import re
import subprocess

from approval_support import REFUND_SCRIPT
from test_cli import AGENTSTEPS, ROOT, _agentsteps, _env

from agentsteps.scripted_model import ScriptedModelServer


def _chat(*args: str, stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [AGENTSTEPS, "chat", *args], input=stdin, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180
    )


def test_chat_starts_a_session_shows_tool_calls_and_resumes_it_later(temporal_env, tmp_path):
    script = {
        "rules": [
            {
                "match": {"contains": "notify carol"},
                "reply": {
                    "tool_calls": [
                        {"name": "send_notification", "arguments": {"recipient": "carol", "message": "build is red"}}
                    ]
                },
            },
            {"match": {"tool_result_for": "send_notification"}, "reply": {"content": "Carol is notified."}},
            {
                "match": {"contains": "what did I ask", "any_contains": "notify carol"},
                "reply": {"content": "You asked me to notify Carol."},
            },
        ],
        "default": {"content": "Hello!"},
    }
    spec = tmp_path / "desk.toml"
    spec.write_text(
        'name = "desk"\ntools = ["get_weather", "send_notification"]\n'
        '[model]\nmodel = "scripted-2026-01-01"\nmax_tokens = 128\ncontext_window = 16000\n'
    )
    with ScriptedModelServer(script) as model:
        env = _env(temporal_env, tmp_path, model.url_openai)
        first = _chat("--spec", str(spec), stdin="hi\nnotify carol please\n/quit\n", env=env)
        assert first.returncode == 0, first.stderr
        sid = re.search(r"session (\S+) \(resume with", first.stdout).group(1)
        assert "agent> Hello!" in first.stdout
        assert "send_notification(" in first.stdout and "agent> Carol is notified." in first.stdout
        assert f"left session {sid} open" in first.stdout

        listed = _agentsteps("session", "list", env=env)
        assert sid in listed.stdout

        again = _chat("--session", sid, stdin="what did I ask?\n/close\n", env=env)
        assert again.returncode == 0, again.stderr
        assert "resumed session" in again.stdout and "agent> You asked me to notify Carol." in again.stdout
        assert f"session {sid} closed after 3 turns" in again.stdout


def test_chat_asks_for_approval_inline_and_sends_the_answer_and_note(temporal_env, tmp_path):
    config = tmp_path / "agentsteps.toml"
    config.write_text('[worker]\ntool_factories = ["approval_support:approval_factory"]\n')
    spec = tmp_path / "refunds.toml"
    spec.write_text(
        'name = "refunds"\ntools = ["refund"]\n'
        '[model]\nmodel = "scripted-2026-01-01"\nmax_tokens = 128\ncontext_window = 16000\n'
    )
    with ScriptedModelServer(REFUND_SCRIPT) as model:
        env = {
            **_env(temporal_env, tmp_path, model.url_openai),
            "AGENTSTEPS_CONFIG": str(config),
            "PYTHONPATH": str(ROOT / "tests" / "support"),
        }
        # Turn 1 approved with a note; turn 2 rejected with a note; each answer is read while the turn waits.
        done = _chat(
            "--spec",
            str(spec),
            stdin="refund A-17\ny\nunder 50 EUR\nrefund A-17 again\nn\nover the limit\n/quit\n",
            env=env,
        )
        sent = [r.body for r in model.requests]

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("Approve? [y/n]") == 2 and "refund(" in out and "requires a person's approval" in out
    first, second = out.index("    approved"), out.index("    rejected")
    assert first < out.index("agent> Refunded 40.") < second < out.index("agent> The refund was refused.")
    tool_results = [m["content"] for body in sent for m in body["messages"] if m["role"] == "tool"]
    assert any("rejected by chat: over the limit" in c for c in tool_results)


def test_chat_prints_the_answer_as_it_streams_and_a_retried_calls_replayed_text_once(temporal_env, tmp_path):
    answer = "The build is green again and every test passed on the second run."
    # The first attempt's stream breaks halfway, after its first text reached the chat; the retried call
    # streams the whole answer again, and the chat folds the replayed part away: one line, the answer once.
    script = {
        "rules": [
            {"match": {}, "times": 1, "reply": {"content": answer, "stream": {"chunk_chars": 4, "fault": "truncated"}}},
            {"match": {}, "reply": {"content": answer, "stream": {"chunk_chars": 4, "delay_seconds": 0.01}}},
        ]
    }
    spec = tmp_path / "desk.toml"
    spec.write_text(
        'name = "desk"\ntools = []\n[model]\nmodel = "scripted-2026-01-01"\nmax_tokens = 128\n'
        "[llm_policy]\ninitial_interval_seconds = 0.2\n"
    )
    with ScriptedModelServer(script) as model:
        done = _chat(
            "--spec", str(spec), stdin="how is the build?\n/quit\n", env=_env(temporal_env, tmp_path, model.url_openai)
        )
        streamed = [r.body.get("stream") for r in model.requests]

    assert done.returncode == 0, done.stderr
    lines = [line.removeprefix("you> ") for line in done.stdout.splitlines()]
    assert [line for line in lines if line.startswith("agent> ")] == [f"agent> {answer}"]
    assert not any("retried" in line for line in lines)
    assert lines.count(f"agent> {answer}") == 1 and streamed == [True, True]
