"""What an activity's earlier attempts left survives every heartbeat of the next one.

Temporal's ActivityEnvironment runs the helpers inside a real activity context, with the heartbeat
details a retried attempt would be handed.
"""

from __future__ import annotations

import dataclasses

import pytest
from temporalio.testing import ActivityEnvironment

from agentsteps.activities.attempts import keep_alive, recalled, remember

pytestmark = pytest.mark.fast


def _attempt(details: list, token: bytes = b"attempt") -> tuple[ActivityEnvironment, list]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_details=details, task_token=token)
    beats: list = []
    env.on_heartbeat = lambda *d: beats.append(d)
    return env, beats


def test_a_liveness_heartbeat_carries_what_the_previous_attempt_left():
    env, beats = _attempt([{"llm_throttled": 2}])
    env.run(keep_alive)
    assert beats == [({"llm_throttled": 2},)]


def test_a_liveness_heartbeat_after_remember_carries_both_attempts_values():
    env, beats = _attempt([{"llm_throttled": 2}], token=b"both")

    def attempt() -> object:
        remember("mcp_unavailable_since:tracker", 12.5)
        keep_alive()
        return recalled("llm_throttled")

    assert env.run(attempt) == 2
    assert beats[-1] == ({"llm_throttled": 2, "mcp_unavailable_since:tracker": 12.5},)


def test_a_first_attempt_beats_with_no_details_and_recalls_nothing():
    env, beats = _attempt([], token=b"first")
    assert env.run(lambda: (keep_alive(), recalled("llm_throttled"))[1]) is None
    assert beats == [()]


def test_details_that_are_not_a_mapping_are_ignored_not_crashed_on():
    env, beats = _attempt(["garbage", 7], token=b"hostile")
    assert env.run(lambda: (keep_alive(), recalled("llm_throttled"))[1]) is None
    assert beats == [()]
