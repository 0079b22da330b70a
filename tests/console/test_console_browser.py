"""The console in a real browser: Debian's headless Chromium, driven by selenium through /usr/bin/chromedriver.

A person clicks Approve in the inbox and sees the run complete; hostile model
text stays text (no script of it runs); every page is usable at a phone's
width (nothing wider than the screen, buttons big enough to tap). Each page's
screenshot is saved under tests/artifacts/console/ (gitignored) at desktop and
phone width.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_support import make_spec
from approval_support import REFUND_SCRIPT, approval_worker
from console_support import console, start_run, wait_pending
from session_support import session_id

from agentsteps.client.sessions import decide_approval, pending_approvals, send_turn
from agentsteps.contracts.session import SessionConfig
from agentsteps.worker import running_worker

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
PHONE = (390, 844)
DESKTOP = (1280, 900)
VIEWER_ZONE = "America/New_York"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'


@pytest.fixture(scope="module")
def chrome() -> Iterator[webdriver.Chrome]:
    binary = shutil.which("chromium")
    if binary is None or not Path(CHROMEDRIVER).exists():
        pytest.fail(
            "the browser tests need Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
        )
    profile = tempfile.mkdtemp(prefix="console-chromium-")
    options = Options()
    options.binary_location = binary
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
    ):
        options.add_argument(flag)
    # The viewer is in New York: the pages must show times in the viewer's zone, not the server's (UTC).
    service = Service(CHROMEDRIVER, env={**os.environ, "TZ": VIEWER_ZONE})
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


async def in_thread(fn, *args):
    """Selenium blocks; the console and the worker share this test's event loop."""
    return await asyncio.to_thread(fn, *args)


def shoot(driver, name: str) -> None:
    """Desktop and phone screenshots of the page on screen, and the phone-width checks."""
    driver.set_window_size(*DESKTOP)
    driver.save_screenshot(str(ARTIFACTS / f"{name}-desktop.png"))
    driver.set_window_size(*PHONE)
    driver.save_screenshot(str(ARTIFACTS / f"{name}-phone.png"))
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"{name}: the page is {overflow}px wider than a phone's screen"
    small = driver.execute_script(
        "return Array.from(document.querySelectorAll('button')).filter(b => b.offsetParent !== null)"
        ".map(b => b.getBoundingClientRect()).filter(r => r.height < 40).length"
    )
    assert small == 0, f"{name}: {small} buttons are too small to tap on a phone"
    driver.set_window_size(*DESKTOP)


def open_page(driver, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")


async def test_an_approver_clicks_approve_in_the_inbox_and_sees_the_run_complete(chrome, client, settings, scripted):
    scripted.set_script(REFUND_SCRIPT)
    ran: list[str] = []
    async with approval_worker(client, settings, ran), console(client) as url:
        handle = await start_run(client, settings.task_queue, tools=["refund"], name="refunds")
        pending = await wait_pending(client, handle.id)

        def approve() -> str:
            open_page(chrome, f"{url}/approvals")
            card = WebDriverWait(chrome, 20).until(
                EC.presence_of_element_located((By.CSS_SELECTOR, f'[data-approval-id="{pending.approval_id}"]'))
            )
            assert "A-17" in card.text and "refund" in card.text
            shoot(chrome, "approvals")
            card.find_element(By.TAG_NAME, "summary").click()  # the details, the note and the name fold out
            card.find_element(By.NAME, "name").send_keys("Ana Ortiz")
            card.find_element(By.NAME, "note").send_keys("customer verified")
            card.find_element(By.CSS_SELECTOR, "button.approve").click()
            return WebDriverWait(chrome, 20).until(EC.presence_of_element_located((By.ID, "flash"))).text

        told = await in_thread(approve)
        assert "approved by Ana Ortiz" in told
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.output == "Refunded 40." and len(ran) == 1

        def run_page() -> str:
            open_page(chrome, f"{url}/runs/{handle.id}")
            status = chrome.find_element(By.ID, "status").text
            shoot(chrome, "run")
            return status + "\n" + chrome.find_element(By.TAG_NAME, "body").text

        page = await in_thread(run_page)
        assert page.startswith("completed") and "Refunded 40." in page and "customer verified" in page

        def inbox_empty() -> None:
            open_page(chrome, f"{url}/approvals")
            assert chrome.find_element(By.ID, "inbox-empty").is_displayed()
            shoot(chrome, "approvals-empty")

        await in_thread(inbox_empty)


async def test_the_inbox_updates_by_itself_when_a_call_starts_waiting(chrome, client, settings, scripted):
    scripted.set_script(REFUND_SCRIPT)
    async with approval_worker(client, settings, []), console(client) as url:
        await in_thread(open_page, chrome, f"{url}/approvals")
        handle = await start_run(client, settings.task_queue, tools=["refund"])
        pending = await wait_pending(client, handle.id)

        def appears() -> None:
            WebDriverWait(chrome, 30).until(
                EC.presence_of_element_located((By.CSS_SELECTOR, f'[data-approval-id="{pending.approval_id}"]'))
            )

        await in_thread(appears)  # no reload: the page's few lines of script fetched the list again
        await handle.cancel()


async def test_hostile_model_text_shows_as_text_and_runs_no_script(chrome, client, settings, scripted):
    scripted.set_script(
        {
            "rules": [
                {"match": {"role": "user"}, "reply": {"content": "Here you go: " + HOSTILE}},
            ]
        }
    )
    async with running_worker(client, settings), console(client) as url:
        handle = await start_run(client, settings.task_queue, "anything", tools=[], name="hostile<b>spec</b>")
        await handle.result()

        def look() -> tuple[object, str]:
            open_page(chrome, f"{url}/runs/{handle.id}")
            output = chrome.find_element(By.ID, "output").text
            return chrome.execute_script("return window.__pwned"), output

        pwned, output = await in_thread(look)
    assert pwned is None
    assert HOSTILE in output  # shown, character for character, as text


async def test_the_runs_list_and_a_session_with_its_live_answer_at_desktop_and_phone_width(
    chrome, client, settings, scripted
):
    # Up to 5 s of streaming: the page the form redirects to must load before the turn ends, or it lists the
    # turn as done and rightly skips its tokens (1.4 s was not enough on a loaded CI machine). Once the page has
    # shown the first tokens, the rest comes at once (end_delays).
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user", "contains": "story"},
                    "reply": {
                        "content": "Once upon a time, tokens arrived one by one.",
                        "stream": {"chunk_chars": 5, "delay_seconds": 0.6},
                    },
                },
            ],
            "default": {"echo": True},
        }
    )
    sid = session_id()
    async with running_worker(client, settings), console(client) as url:
        await send_turn(
            client,
            make_spec(tools=[], name="storyteller"),
            "hello",
            session_id=sid,
            task_queue=settings.task_queue,
            config=SessionConfig(stream_tokens=True),
        )

        def runs_list() -> str:
            open_page(chrome, f"{url}/runs")
            shoot(chrome, "runs")
            return chrome.find_element(By.ID, "runs").text

        assert sid in await in_thread(runs_list)

        def send_and_watch() -> str:
            open_page(chrome, f"{url}/sessions/{sid}")
            shoot(chrome, "session")
            chrome.find_element(By.ID, "turn-input").send_keys("tell me a story")
            chrome.find_element(By.CSS_SELECTOR, "#turn-form button").click()
            WebDriverWait(chrome, 20).until(EC.presence_of_element_located((By.ID, "flash")))
            # The answer streams into the page before the turn ends (then the page reloads with the turn listed).
            WebDriverWait(chrome, 30).until(lambda d: "Once upon" in d.find_element(By.ID, "live").text)
            partial = chrome.find_element(By.ID, "live").text
            shoot(chrome, "session-streaming")
            scripted.end_delays()
            WebDriverWait(chrome, 30).until(lambda d: "tell me a story" in d.find_element(By.ID, "turns").text)
            return partial

        partial = await in_thread(send_and_watch)
        assert partial.startswith("Once upon")


async def test_signing_in_with_the_token_in_the_browser(chrome, client):
    from pydantic import SecretStr

    async with console(client, token=SecretStr("browser-token-123")) as url:

        def sign_in() -> str:
            chrome.delete_all_cookies()
            open_page(chrome, f"{url}/runs")
            assert "/login" in chrome.current_url
            shoot(chrome, "login")
            chrome.find_element(By.ID, "token").send_keys("browser-token-123")
            chrome.find_element(By.CSS_SELECTOR, "form button").click()
            # The sign-in page's own address names /runs (where it returns to): wait until it is left.
            WebDriverWait(chrome, 20).until(lambda d: "/login" not in d.current_url and "/runs" in d.current_url)
            return chrome.find_element(By.TAG_NAME, "h1").text

        assert await in_thread(sign_in) == "Runs and sessions"


TWO_REFUNDS = {
    "rules": [
        {
            "match": {"role": "user"},
            "reply": {
                "tool_calls": [
                    {"name": "refund", "arguments": {"order": "A-17", "amount": 40.0}},
                    {"name": "refund", "arguments": {"order": "B-2", "amount": 5.0}},
                ]
            },
        },
        {"match": {"tool_result_for": "refund"}, "reply": {"content": "Done."}},
    ]
}


async def pending_of(client, workflow_id: str):
    return await pending_approvals(client, workflow_id)


def card_of(driver, approval_id: str):
    selector = f'[data-approval-id="{approval_id}"]'
    return WebDriverWait(driver, 20).until(EC.presence_of_element_located((By.CSS_SELECTOR, selector)))


def type_note(driver, card, text: str) -> None:
    card.find_element(By.TAG_NAME, "summary").click()
    card.find_element(By.NAME, "note").send_keys(text)


def still_typing(driver, text: str) -> tuple[str, bool, object]:
    """The note's text, whether it still has the focus, and the marker a reload would have wiped."""
    return (
        driver.execute_script("return document.activeElement.value"),
        driver.execute_script("return document.activeElement.tagName === 'TEXTAREA'"),
        driver.execute_script("return window.__no_reload"),
    )


async def test_a_returning_approver_sees_a_new_call_appear_live_while_a_half_typed_note_stays(
    chrome, client, settings, scripted
):
    scripted.set_script(REFUND_SCRIPT)
    async with approval_worker(client, settings, []), console(client) as url:
        first = await start_run(client, settings.task_queue, tools=["refund"], name="refunds")
        one = await wait_pending(client, first.id)

        def half_type() -> None:
            open_page(chrome, f"{url}/approvals")
            # A returning approver: the name field holds the name of their last decision (the old list froze then).
            chrome.add_cookie({"name": "agentsteps_console_name", "value": "Ana"})
            open_page(chrome, f"{url}/approvals")
            source = chrome.page_source
            assert "location.reload" not in source and 'http-equiv="refresh"' not in source
            chrome.execute_script("window.__no_reload = 1")
            type_note(chrome, card_of(chrome, one.approval_id), "customer called tw")

        await in_thread(half_type)
        second = await start_run(client, settings.task_queue, tools=["refund"], name="refunds")
        two = await wait_pending(client, second.id)
        started = asyncio.get_running_loop().time()

        def new_card_appears() -> tuple[str, bool, object, str]:
            WebDriverWait(chrome, 20).until(lambda d: d.find_element(By.ID, "count").text == "2")
            assert card_of(chrome, two.approval_id).is_displayed()
            shoot_phone_inbox(chrome, "approvals-live")
            deadline = card_of(chrome, two.approval_id).find_element(By.CSS_SELECTOR, "time.deadline")
            shown = (deadline.text, deadline.get_attribute("title"))
            return (*still_typing(chrome, "customer called tw"), chrome.find_element(By.ID, "count").text, shown)

        note, focused, marker, count, (local, utc) = await in_thread(new_card_appears)
        # In the viewer's zone, the zone named (the inserted card too); the server's UTC text is the fallback.
        assert utc.endswith("UTC") and local != utc and ("EST" in local or "EDT" in local or "GMT-5" in local), local
        assert asyncio.get_running_loop().time() - started < 10
        assert (note, focused, marker, count) == ("customer called tw", True, 1, "2")
        await first.cancel()
        await second.cancel()


def shoot_phone_inbox(driver, name: str) -> None:
    """At a phone's width the first Approve is on the first screen, big enough to tap."""
    driver.set_window_size(*PHONE)
    driver.execute_script("window.scrollTo(0, 0)")
    bottom, height, screen = driver.execute_script(
        "var b = document.querySelector('button.approve').getBoundingClientRect();"
        "return [b.bottom, b.height, window.innerHeight]"
    )
    driver.save_screenshot(str(ARTIFACTS / f"{name}-phone.png"))
    driver.set_window_size(*DESKTOP)
    driver.save_screenshot(str(ARTIFACTS / f"{name}-desktop.png"))
    assert bottom <= screen and height >= 40, (bottom, height, screen)


async def test_on_a_runs_page_a_note_survives_live_updates_and_a_stale_decision_reads_true(
    chrome, client, settings, scripted
):
    scripted.set_script(TWO_REFUNDS)
    async with approval_worker(client, settings, []), console(client) as url:
        handle = await start_run(client, settings.task_queue, tools=["refund"], name="refunds")
        await wait_pending(client, handle.id)
        for _ in range(100):  # both calls of the step wait
            if len(await pending_of(client, handle.id)) == 2:
                break
            await asyncio.sleep(0.05)
        first, second = sorted(await pending_of(client, handle.id), key=lambda p: p.approval_id)

        def half_type() -> None:
            open_page(chrome, f"{url}/runs/{handle.id}")
            assert "location.reload" not in chrome.page_source
            chrome.execute_script("window.__no_reload = 1")
            type_note(chrome, card_of(chrome, second.approval_id), "checking B-2 with fi")

        await in_thread(half_type)
        await decide_approval(client, handle.id, first.approval_id, approve=True, approver="Bo")  # elsewhere

        def first_marked_gone() -> tuple[str, bool, object]:
            WebDriverWait(chrome, 20).until(lambda d: "gone" in card_of(d, first.approval_id).get_attribute("class"))
            shoot(chrome, "run-live")
            return still_typing(chrome, "checking B-2 with fi")

        assert await in_thread(first_marked_gone) == ("checking B-2 with fi", True, 1)

        # A phone that slept through the updates: the page is stale, the run is stopped meanwhile.
        await in_thread(chrome.execute_script, "window.agentstepsLive.close()")
        await handle.terminate("wrong customer")

        def approve_anyway() -> str:
            card_of(chrome, second.approval_id).find_element(By.CSS_SELECTOR, "button.approve").click()
            told = WebDriverWait(chrome, 20).until(EC.presence_of_element_located((By.ID, "flash"))).text
            shoot(chrome, "second-decision")
            return told

        told = await in_thread(approve_anyway)
        assert (
            told.startswith("Not recorded: the run was stopped (terminated) at ") and "while this call waited" in told
        )
