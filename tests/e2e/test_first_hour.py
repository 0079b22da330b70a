"""A newcomer's first hour, as the README teaches it, on a fresh clone with no API key.

In the README's order: ``make demo``; ``agentsteps dev`` (with the ticket
tracker on its worker, as the shipped schedule needs); ``make demo`` again
while dev runs (its workers never take each other's calls); a run from
Python and from the ``temporal`` CLI; a chat whose refund waits for an
approval typed at the prompt; the session closed and a turn on it refused
on one line; a code-mode run; a monitor tick whose report is printed. Each
step's output is checked. See ``first_hour_support.py`` for the machine.
"""

from __future__ import annotations

import re

import pytest
from first_hour_support import RUN, Newcomer, doc_blocks, fresh_clone

pytestmark = [pytest.mark.first_hour, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    person = Newcomer(fresh_clone(tmp_path_factory.mktemp("first-hour")))
    yield person
    person.stop_dev()


def test_the_first_hour_runs_as_the_readme_teaches(newcomer: Newcomer):
    # 1. `make demo`: the runtime only, no warning on every command, the whole story offline.
    demo = newcomer.sh("make demo", venv=False, timeout=900)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    for expected in (
        "offline scripted model",
        "status: completed",
        "contract violations handled",
        "Code mode",
        "Stalled-ticket monitor",
        "nudged",
        "Where to look",
        "To keep them alive",
        "Demo finished",
    ):
        assert expected in out, (expected, out)
    assert "Warning" not in demo.stdout + demo.stderr  # setuptools' editable-install warning, among others
    assert newcomer.sh("python -c 'import pytest'").returncode != 0, "make demo installed the test extras"

    # 2. `agentsteps dev`, with the tracker on its worker: it says what it started and which model answers.
    banner = newcomer.start_dev(config="examples/tickets.toml")
    assert f"127.0.0.1:{newcomer.port} (started by this command)" in banner
    assert "offline scripted model" in banner

    # 3. `make demo` again, while dev runs: its own task queues, dev's server (and the links stay alive).
    again = newcomer.sh("make demo", venv=False, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "found already running" in again.stdout and "Demo finished" in again.stdout
    assert "stay alive while" in again.stdout

    # 4. A run from the command line goes to dev's worker (never a second, disagreeing one).
    run = newcomer.sh(
        'agentsteps run --spec examples/demo_agent.toml --input "What is the weather in Paris and Tokyo?"'
    )
    assert run.returncode == 0, run.stderr
    assert "served by the worker(s) already polling it" in run.stderr and "agentsteps-dev" in run.stderr
    assert "status: completed" in run.stdout and '"warmest_city": "Tokyo"' in run.stdout

    # 5. A run from the `temporal` CLI, by name with plain JSON.
    started = newcomer.sh(
        newcomer.portable(
            "temporal workflow start --type AgentWorkflow --task-queue agentsteps --workflow-id first-hour-1 "
            '--input \'{"spec": {"model": {"provider": "openai", "model": "gpt-4o-mini-2024-07-18"}, '
            '"tools": ["get_weather"]}, "input": "Is it raining in Paris?"}\'\n'
            "temporal workflow result --workflow-id first-hour-1"
        )
    )
    assert started.returncode == 0, started.stderr
    assert "In Paris it is 18.5 C (light rain)." in started.stdout

    # 6. A chat whose refund waits for a person: approved at the prompt, then issued.
    chat = newcomer.sh(
        "agentsteps chat --spec examples/desk_agent.toml",
        stdin="What is the weather in Tokyo?\nPlease refund order A-1001\ny\nok, under 50 EUR\n/quit\n",
    )
    assert chat.returncode == 0, chat.stderr
    assert "agent> In Tokyo it is 24.0 C (clear)." in chat.stdout
    assert "refund_order(" in chat.stdout and "Approve? [y/n]" in chat.stdout and "approved" in chat.stdout
    assert re.search(r"agent> Refund R-\w+ for order A-1001 is issued\.", chat.stdout), chat.stdout
    sid = re.search(r"session (\S+) \(resume with", chat.stdout).group(1)

    # 7. The session closed; a turn on it is refused on one line, as is an unknown id.
    closed = newcomer.sh(f"agentsteps session close {sid}")
    assert closed.returncode == 0 and f"session {sid} closed after 2 turns" in closed.stdout, closed.stderr
    refused = newcomer.sh(f"agentsteps chat --session {sid}", stdin="one more?\n")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1].startswith("error: SessionClosedError: ")
    unknown = newcomer.sh("agentsteps session show session-nope-000")
    assert unknown.returncode == 1 and unknown.stderr.strip().splitlines()[-1].startswith("error: no session")
    assert "Traceback" not in refused.stderr + unknown.stderr

    # 8. Code mode: the model writes a program; each tool call in it is its own activity.
    code = newcomer.sh(
        "agentsteps run --spec examples/code_agent.toml "
        '--input "Which of Paris, Tokyo and London is warmest? Notify alice@example.com."'
    )
    assert code.returncode == 0, code.stderr
    assert "status: completed" in code.stdout and '"warmest_city": "Tokyo"' in code.stdout

    # 9. A monitor tick: the shipped schedule, triggered, its report printed.
    tick = newcomer.sh("agentsteps schedule apply && agentsteps schedule trigger stalled-tickets --wait")
    assert tick.returncode == 0, tick.stdout + tick.stderr
    assert "triggered stalled-tickets: workflow stalled-tickets-" in tick.stdout
    assert re.search(r"tick \d{4}-\d\d-\d\d: \d+ stalled, \d+ nudged", tick.stdout), tick.stdout


def test_every_python_and_sh_block_of_the_readme_and_docs_runs_as_written(newcomer: Newcomer):
    """Against the dev stack the first hour left running; a block that cannot run here says why in the page."""
    if newcomer.dev is None or newcomer.dev.poll() is not None:
        pytest.skip("needs the dev stack of the first-hour test")
    failed = []
    for block in doc_blocks(newcomer.clone):
        if block.lang not in RUN or block.not_run is not None:
            continue
        text = newcomer.portable(block.body, block.lang)
        if block.lang == "python":
            (newcomer.clone / "snippet.py").write_text(text)
            done = newcomer.sh("python snippet.py", stdin="", timeout=240)
        else:
            done = newcomer.sh(text, stdin="", timeout=240)
        if done.returncode != 0:
            failed.append(
                f"{block.where} ({block.lang}) exited {done.returncode}:\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
            )
    assert failed == [], "\n\n".join(failed)


def test_dev_stops_on_ctrl_c(newcomer: Newcomer):
    if newcomer.dev is None:
        pytest.skip("dev never started")
    assert newcomer.stop_dev() == 0, newcomer.dev_log.read_text()[-3000:]
