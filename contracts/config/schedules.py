"""Schedule files (``deploy/schedules/*.toml``): their typed form and parsing.

A file that cannot be applied raises ``ScheduleFileError`` (``contracts/errors.py``).

A file declares one Temporal Schedule: which workflow to start, with which
input, how often, and what to do when a tick is still running (``skip``) or
was missed (catch up within a bounded window). ``client/schedules.py`` applies them.

    id = "stalled-tickets"            # optional: the file name without .toml
    workflow = "StalledTicketMonitor"
    task_queue = "agentsteps"
    every = "1h"                      # or cron = "0 * * * *"
    catchup_window = "2h"
    [input.spec]                      # the workflow's input, validated here
    lead = "lead.core"
    ...

Pure: parsing text into models, no Temporal and no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from ..errors import ScheduleFileError
from ..monitor import MonitorInput
from ..names import AGENT_WORKFLOW, MONITOR_WORKFLOW
from ..spec import AgentInput

SCHEDULE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
MAX_CATCHUP = timedelta(days=1)
"""Catch-up is bounded: after a long outage a monitor runs once, not once per missed hour."""

WORKFLOW_INPUTS: dict[str, type[BaseModel]] = {
    MONITOR_WORKFLOW: MonitorInput,
    AGENT_WORKFLOW: AgentInput,
}
"""Workflows a schedule file may start, with the model their input must validate against."""

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(value: object) -> object:
    """``"90s"``, ``"15m"``, ``"1h30m"``, ``"1d"`` or a number of seconds; anything else is left to the
    ``timedelta`` field's own validation (a ``BeforeValidator``)."""
    if isinstance(value, bool):
        raise ValueError("a duration is a string such as '1h' or '15m'")
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if isinstance(value, str):
        return duration_from_text(value)
    return value


def duration_from_text(value: str) -> timedelta:
    """``"90s"``, ``"15m"``, ``"1h30m"``, ``"1d"``; anything else is a ``ValueError`` that says how to write one."""
    match = _DURATION.match(value.strip())
    if not match or not any(match.groups()):
        raise ValueError(f"{value!r} is not a duration; write it like '1h', '15m', '90s' or '1d12h'")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def format_duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]


class ScheduleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=SCHEDULE_ID_PATTERN)
    workflow: str
    task_queue: str = Field(default="agentsteps", min_length=1)
    every: Duration | None = None
    offset: Duration | None = None
    """Phase within ``every``, e.g. every 1h at minute 5."""
    cron: str | None = None
    time_zone: str | None = None
    jitter: Duration | None = None
    overlap: Overlap = "skip"
    catchup_window: Duration = timedelta(hours=1)
    execution_timeout: Duration | None = timedelta(hours=1)
    """Bounds a stuck tick; with ``skip``, a tick that never ends would block every later one."""
    paused: bool = False
    """Only when the schedule is created: ``apply`` never undoes an operator's pause or resume."""
    note: str = ""
    input: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> ScheduleFile:
        if (self.every is None) == (self.cron is None):
            raise ValueError("every: give exactly one of 'every' and 'cron'")
        if self.every is not None and self.every < timedelta(seconds=1):
            raise ValueError("every: must be at least 1s")
        if not timedelta(seconds=10) <= self.catchup_window <= MAX_CATCHUP:
            raise ValueError(f"catchup_window: must be between 10s and {format_duration(MAX_CATCHUP)}")
        if self.workflow not in WORKFLOW_INPUTS:
            raise ValueError(
                f"workflow: unknown workflow {self.workflow!r}; known: {', '.join(sorted(WORKFLOW_INPUTS))}"
            )
        return self

    def workflow_input(self) -> BaseModel:
        return WORKFLOW_INPUTS[self.workflow].model_validate(self.input)

    def digest(self) -> str:
        """What ``apply`` compares: everything the file says except the initial ``paused``."""
        data = self.model_dump(mode="json", exclude={"paused"})
        data["input"] = self.workflow_input().model_dump(mode="json")
        return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "$"


def _first_error(exc: ValidationError) -> tuple[str, str]:
    error = exc.errors()[0]
    field = _dotted(tuple(p for p in error["loc"] if not (isinstance(p, str) and "[" in p)))
    message = error["msg"].removeprefix("Value error, ")
    if field == "$":
        # A model-level check names its field first: "catchup_window: must be ...".
        head, sep, rest = message.partition(": ")
        if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head):
            return head, rest
    return field, message


def parse_schedule_file(text: str, *, name: str, origin: str | None = None) -> ScheduleFile:
    """Parse one file's text; ``name`` (the file stem) is the id unless the file sets one."""
    origin = origin or name
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScheduleFileError(origin, "$", f"not valid TOML: {exc}") from None
    data.setdefault("id", name)
    try:
        parsed = ScheduleFile.model_validate(data)
    except ValidationError as exc:
        field, message = _first_error(exc)
        raise ScheduleFileError(origin, field, message) from None
    try:
        parsed.workflow_input()
    except ValidationError as exc:
        field, message = _first_error(exc)
        raise ScheduleFileError(origin, f"input.{field}" if field != "$" else "input", message) from None
    return parsed


class ScheduleChange(BaseModel):
    """What ``agentsteps schedule`` did to one schedule."""

    id: str
    outcome: Literal["created", "updated", "unchanged", "paused", "resumed", "triggered", "skipped"]
    workflow_id: str | None = None
    """``trigger``: the workflow the tick started (``skipped``: none, a tick was still running)."""


class ScheduleStatus(BaseModel):
    """One row of ``agentsteps schedule list``."""

    id: str
    workflow: str
    paused: bool
    note: str = ""
    managed: bool
    """Created by ``agentsteps schedule apply`` (its digest is in the action's memo)."""
    next_run: datetime | None = None
    last_run: datetime | None = None


__all__ = [
    "MAX_CATCHUP",
    "WORKFLOW_INPUTS",
    "ScheduleChange",
    "ScheduleFile",
    "ScheduleStatus",
    "format_duration",
    "parse_duration",
    "parse_schedule_file",
]
