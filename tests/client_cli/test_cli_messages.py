"""What the CLI says when something is off: one line, naming the cause and the next step, and true.

Each was reproduced wrong before: ``chat`` left before its first message offered to resume a session that
never existed; a closed session told a terminal user to "pass reopen=True"; ``budget show`` printed
``soft 500/None``; a mistyped tool said "known tools: none" while the worker served four; config errors
dropped their type name; the fork of an unknown id suggested a ``--histories`` flag fork does not take;
``agentsteps run`` waiting for an approval said "started" and nothing about where to decide it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess

import pytest
from test_cli import AGENTSTEPS, ROOT, _agentsteps, _env

from agentsteps.cli.quotas import summary
from agentsteps.client.sessions import close_session, decide_approval, send_turn
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.quotas.config import DegradeModel, PeriodBudget, TenantBudget
from agentsteps.contracts.quotas.wire import AccountView
from agentsteps.scripted_model import ScriptedModelServer

OFFLINE = json.loads((ROOT / "examples" / "offline_script.json").read_text())


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.fast
def test_budget_show_says_each_limit_in_words_and_none_for_an_unset_one():
    view = AccountView(
        name="acme",
        kind="tenant",
        tenant=TenantBudget(
            name="acme",
            budget={"day": PeriodBudget(tokens_soft=500, usd_hard=5.0)},
            degrade_to=[DegradeModel(model="gpt-4o-mini-2024-07-18")],
        ),
    )
    text = summary(view)
    assert "(soft: 500 tokens; hard: $5)" in text and "None" not in text
    assert "(soft: none; hard: none)" in summary(
        AccountView(name="b", kind="tenant", tenant=TenantBudget(name="b", budget={"month": PeriodBudget()}))
    )


def test_a_config_error_keeps_its_type_name_on_one_line(tmp_path):
    done = _agentsteps(
        "--config", str(tmp_path / "missing.toml"), "tools", "list", env={**os.environ, "AGENTSTEPS_CONFIG": ""}
    )
    assert done.returncode == 2
    assert last_line(done.stderr).startswith("error: InvalidSpecError: invalid config: ")
    assert len(done.stderr.strip().splitlines()) == 1


def test_chat_left_before_its_first_message_offers_nothing_to_resume(temporal_env, tmp_path):
    with ScriptedModelServer(OFFLINE) as model:
        done = subprocess.run(
            [AGENTSTEPS, "chat", "--spec", "examples/desk_agent.toml"],
            input="",
            env=_env(temporal_env, tmp_path, model.url_openai),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "resume with" not in done.stdout
    assert re.search(r"left before the first message: session \S+ was never started \(nothing to resume\)", done.stdout)


async def test_a_closed_session_tells_a_terminal_user_what_a_terminal_can_do(temporal_env, tmp_path, engine, scripted):
    scripted.set_script({"default": {"content": "ok"}})
    sid = f"session-msg-{tmp_path.name[-6:]}"
    spec = AgentSpec(name="msg", model=LLMConfig(model="scripted-2026-01-01", max_tokens=64), tools=[])
    await send_turn(engine.client, spec, "hello", session_id=sid, task_queue=engine.task_queue)
    await close_session(engine.client, sid, "resolved")
    env = {**_env(temporal_env, tmp_path, scripted.url_openai), "AGENTSTEPS_TASK_QUEUE": engine.task_queue}
    done = await asyncio.to_thread(_agentsteps, "chat", "--session", sid, env=env)

    assert done.returncode == 1
    line = last_line(done.stderr)
    assert line == (
        f"error: SessionClosedError: session {sid} has ended (resolved); its id is not reused silently: "
        "start a new session (under a new id) with: agentsteps chat --spec FILE"
    )


def test_a_mistyped_tool_and_an_unknown_fork_say_where_to_look(temporal_env, tmp_path):
    spec = tmp_path / "typo.toml"
    spec.write_text('name = "typo"\ntools = ["get_wether"]\n[model]\nmodel = "scripted-2026-01-01"\n')
    with ScriptedModelServer(OFFLINE) as model:
        env = _env(temporal_env, tmp_path, model.url_openai)
        typo = _agentsteps("run", "--spec", str(spec), "--input", "hi", env=env)
        fork = _agentsteps("fork", "never-ran-here", "--at-step", "0", env=env)

    assert typo.returncode == 1
    line = last_line(typo.stderr)
    assert line.startswith("run failed: InvalidSpecError: ") and '"get_wether" is not registered' in line
    assert "known tools: none" not in line and "agentsteps tools list" in line
    assert fork.returncode == 2
    line = last_line(fork.stderr)
    assert line.startswith("error: HistoryUnavailableError: the history of run 'never-ran-here'")
    assert "--histories" not in line and "check the id" in line


async def test_run_waiting_for_an_approval_says_where_to_decide_it(temporal_env, tmp_path):
    with ScriptedModelServer(OFFLINE) as model:
        env = _env(temporal_env, tmp_path, model.url_openai)
        process = subprocess.Popen(
            [AGENTSTEPS, "run", "--spec", "examples/desk_agent.toml", "--input", "Please refund order A-1001"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            told = ""
            while not told:
                line = await asyncio.wait_for(asyncio.to_thread(process.stderr.readline), timeout=120)
                assert line, "the run ended without saying where to decide"
                if "waits for a person" in line:
                    told = line.strip()
            found = re.search(r"^run (\S+) waits for a person to approve refund_order \(approval (\S+)\)", told)
            assert found, told
            await decide_approval(temporal_env.client, found.group(1), found.group(2), approve=True, approver="ana")
            out, _ = await asyncio.to_thread(process.communicate, timeout=120)
        finally:
            process.kill()

    assert "/approvals" in told and "temporal workflow update execute" in told and "--name approve" in told
    assert process.returncode == 0 and "is issued" in out
