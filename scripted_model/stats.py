"""What the scripted model has answered: statuses, 429s and tokens served, per model.

Read by tests and benchmarks through ``ScriptedModelServer.stats()`` or
``GET /stats``; ``set_script`` starts them again.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _ModelTally:
    requests: int = 0
    http_429: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class ServerStats:
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _statuses: Counter[int] = field(default_factory=Counter)
    _quota_429: Counter[str] = field(default_factory=Counter)
    _models: dict[str, _ModelTally] = field(default_factory=dict)
    _in_flight: int = 0
    _max_in_flight: int = 0

    def began(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def ended(
        self, model: str, status: int, input_tokens: int = 0, output_tokens: int = 0, quota_limit: str | None = None
    ) -> None:
        """One answer sent: its status, the tokens it served, and the quota limit that refused it if one did."""
        with self._lock:
            self._in_flight -= 1
            self._statuses[status] += 1
            tally = self._models.setdefault(model, _ModelTally())
            tally.requests += 1
            tally.http_429 += status == 429
            tally.input_tokens += input_tokens
            tally.output_tokens += output_tokens
            if quota_limit is not None:
                self._quota_429[quota_limit] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            models = {name: vars(t).copy() for name, t in self._models.items()}
            input_tokens = sum(t.input_tokens for t in self._models.values())
            output_tokens = sum(t.output_tokens for t in self._models.values())
            return {
                "requests": sum(self._statuses.values()),
                "status": {str(k): v for k, v in sorted(self._statuses.items())},
                "http_429": self._statuses[429],
                "quota_429": dict(self._quota_429),
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
                "models": models,
            }
