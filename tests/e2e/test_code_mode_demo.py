"""The demo's code-mode run works offline and prints the program, its calls and its result."""

from __future__ import annotations

import io

from agentsteps.demos.code_mode import demo_code_mode_run
from agentsteps.examples.demo_tools import NotificationLedger


async def test_code_mode_demo_runs_offline_and_prints_program_calls_and_result(client, settings):
    out = io.StringIO()
    result = await demo_code_mode_run(client, settings, out)
    text = out.getvalue()

    assert result.status == "completed"
    assert result.output["warmest_city"] == "Tokyo"
    assert "Paris 18.5 C, light rain" in result.output["summary"]
    calls = result.steps[-1].tool_calls
    assert sorted(c.name for c in calls) == ["get_weather"] * 3 + ["send_notification"]
    # The notification really went out, once, from inside the program.
    [(key, recipient, attempts)] = NotificationLedger(settings.state_dir / "notifications.db").delivered()
    assert recipient == "alice@example.com" and attempts == 1
    assert "await asyncio.gather(*[get_weather(city)" in text
    assert "send_notification(" in text and '"warmest_city": "Tokyo"' in text
    assert "Tool calls the program made (4" in text
