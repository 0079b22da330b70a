"""A deterministic data generator: same seed and ``now``, same database.

Bodies are assembled from tracker-shaped pieces (steps to reproduce, logs,
stack traces, environment tables) so they run to several kilobytes, like the
issues that make MCP results large in practice. Everything is inserted in one
transaction with ``executemany``; 5,000 issues take about a second.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .db import connect, format_ts

PROJECTS: dict[str, tuple[str, str]] = {
    "PROJ": ("Core platform", "lead.core"),
    "OPS": ("Operations", "lead.ops"),
    "WEB": ("Web frontend", "lead.web"),
    "API": ("Public API", "lead.api"),
}
USERS = [
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "niaj",
    "olivia",
    "peggy",
    "rupert",
    "sybil",
    "trent",
    "victor",
    "walter",
    "yolanda",
]
LABELS = ["bug", "feature", "regression", "customer", "p1", "p2", "p3", "docs", "infra", "security", "flaky-test"]
COMPONENTS = ["billing", "auth", "search", "ingest", "scheduler", "exporter", "dashboard", "notifications", "sync"]
VERBS = [
    "fails",
    "times out",
    "returns stale data",
    "crashes",
    "leaks memory",
    "double-charges",
    "hangs",
    "drops events",
    "logs the wrong tenant",
    "renders blank",
]
CONDITIONS = [
    "after the nightly deploy",
    "under load",
    "for EU tenants",
    "when the cache is cold",
    "on retries",
    "for accounts with >10k rows",
    "behind the corporate proxy",
    "on Safari 17",
    "after a token refresh",
    "when two jobs overlap",
]
SENTENCES = [
    "We first noticed this in the on-call channel when the error budget alert fired twice in an hour.",
    "The behaviour is intermittent, roughly one request in forty, which makes it hard to bisect.",
    "Rolling back the last release did not help, so it is probably not a code regression on our side.",
    "Customer success has three open escalations that look like the same root cause.",
    "The dashboards show p99 latency climbing from 300 ms to well over 4 s during the incident window.",
    "I could reproduce it locally with the production snapshot but not with the synthetic fixtures.",
    "Our retry wrapper hides the first failure, so the logs only show the second attempt.",
    "There is a related discussion in the architecture review notes from last quarter.",
    "The upstream provider changed its pagination defaults recently, which might be involved.",
    "A workaround exists (restart the worker), but it only buys us a few hours each time.",
    "This blocks the migration plan for the reporting service, so it needs an owner this sprint.",
    "Metrics for the affected queue show a sawtooth pattern consistent with a leak.",
    "The support macro tells customers to clear their cache, which is not a real fix.",
    "We should add a regression test once the cause is understood.",
    "Security asked us to confirm that no data from other tenants was exposed.",
]
COMMENT_LINES = [
    "Looking into this now.",
    "Can you attach the full logs from the affected node?",
    "I think this is a duplicate of an older ticket, linking it.",
    "Bumping priority: another customer hit it.",
    "Fix is in review.",
    "Deployed a mitigation, monitoring.",
    "Still seeing it on staging.",
    "Could not reproduce on the latest build.",
    "Added a feature flag so we can turn the new path off.",
    "Waiting on the vendor to respond.",
    "Pairing with the owner tomorrow.",
]


def _stack_trace(rng: random.Random, component: str) -> str:
    frames = [
        f'  File "/srv/app/{component}/{rng.choice(["handlers", "service", "store", "client"])}.py", '
        f"line {rng.randint(20, 900)}, in {rng.choice(['run', 'handle', 'fetch', 'commit', 'dispatch', 'retry'])}"
        for _ in range(rng.randint(4, 9))
    ]
    error = rng.choice(
        [
            "TimeoutError: operation timed out after 30s",
            "KeyError: 'tenant_id'",
            "sqlalchemy.exc.OperationalError: database is locked",
            "ConnectionResetError: [Errno 104] Connection reset by peer",
        ]
    )
    return "Traceback (most recent call last):\n" + "\n".join(frames) + "\n" + error


def _log_excerpt(rng: random.Random, when: datetime, component: str) -> str:
    lines = []
    for i in range(rng.randint(6, 18)):
        ts = format_ts(when + timedelta(seconds=7 * i))
        level = rng.choice(["INFO", "INFO", "WARN", "ERROR"])
        lines.append(
            f"{ts} {level:5} {component}[{rng.randint(1000, 9999)}] "
            f"request_id={rng.getrandbits(48):012x} latency_ms={rng.randint(5, 9000)} "
            f"{rng.choice(['retrying', 'upstream 502', 'cache miss', 'lock wait', 'ok'])}"
        )
    return "\n".join(lines)


def _body(rng: random.Random, component: str, title: str, when: datetime) -> str:
    parts = [f"## Summary\n\n{title}. " + " ".join(rng.sample(SENTENCES, rng.randint(3, 6)))]
    steps = "\n".join(
        f"{n}. {s}"
        for n, s in enumerate(
            rng.sample(
                [
                    f"Open the {component} page as an admin",
                    "Trigger a sync for a large tenant",
                    "Wait for the background job to pick it up",
                    "Refresh twice within ten seconds",
                    "Switch the region to eu-west-1",
                    "Enable the beta flag",
                    "Import the sample CSV",
                    "Revoke and re-issue the API token",
                ],
                rng.randint(3, 6),
            ),
            start=1,
        )
    )
    parts.append(f"## Steps to reproduce\n\n{steps}")
    parts.append("## Expected\n\n" + rng.choice(SENTENCES))
    parts.append("## Actual\n\n" + " ".join(rng.sample(SENTENCES, rng.randint(2, 4))))
    if rng.random() < 0.8:
        parts.append("## Logs\n\n```\n" + _log_excerpt(rng, when, component) + "\n```")
    if rng.random() < 0.6:
        parts.append("## Stack trace\n\n```\n" + _stack_trace(rng, component) + "\n```")
    env_rows = "\n".join(
        f"| {k} | {v} |"
        for k, v in [
            ("version", f"{rng.randint(1, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"),
            ("region", rng.choice(["us-east-1", "eu-west-1", "ap-south-1"])),
            ("plan", rng.choice(["free", "team", "enterprise"])),
            ("browser", rng.choice(["Chrome 126", "Firefox 128", "Safari 17", "n/a"])),
        ]
    )
    parts.append("## Environment\n\n| key | value |\n|---|---|\n" + env_rows)
    parts.append("## Notes\n\n" + " ".join(rng.sample(SENTENCES, rng.randint(2, 5))))
    return "\n\n".join(parts)


def seed(path: str | Path, *, issues: int = 5000, seed: int = 7, now: datetime | None = None) -> int:
    """Fill an empty database at ``path``; returns the number of issues written.

    Refuses a database that already has issues, so re-running a demo never
    duplicates data.
    """
    now = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    rng = random.Random(seed)
    conn = connect(path)
    try:
        if conn.execute("SELECT COUNT(*) FROM issues").fetchone()[0]:
            return 0
        issue_rows = []
        comment_rows = []
        counters = dict.fromkeys(PROJECTS, 0)
        for _ in range(issues):
            project = rng.choice(list(PROJECTS))
            counters[project] += 1
            issue_id = f"{project}-{counters[project]}"
            component = rng.choice(COMPONENTS)
            title = f"{component.capitalize()} {rng.choice(VERBS)} {rng.choice(CONDITIONS)}"
            created = now - timedelta(days=rng.uniform(1, 120))
            # Skewed towards recent activity, with a long tail of stale issues.
            updated = min(now, created + timedelta(days=rng.expovariate(1 / 10)))
            state = rng.choices(["open", "in_progress", "closed"], weights=[5, 2, 3])[0]
            assignee = None if rng.random() < 0.15 else rng.choice(USERS)
            labels = sorted(rng.sample(LABELS, rng.randint(0, 3)))
            issue_rows.append(
                (
                    issue_id,
                    project,
                    counters[project],
                    title,
                    _body(rng, component, title, created),
                    state,
                    assignee,
                    rng.choice(USERS),
                    json.dumps(labels),
                    format_ts(created),
                    format_ts(updated),
                )
            )
            n_comments = rng.choices([0, 1, 2, 3, 5, 8], weights=[3, 4, 3, 2, 1, 1])[0]
            span = (updated - created).total_seconds()
            for k in range(n_comments):
                at = created + timedelta(seconds=span * (k + 1) / (n_comments + 1))
                text = " ".join(rng.sample(COMMENT_LINES, rng.randint(1, 3)))
                comment_rows.append((issue_id, rng.choice(USERS), text, format_ts(at)))
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO projects (key, name, lead) VALUES (?, ?, ?)",
            [(k, name, lead) for k, (name, lead) in PROJECTS.items()],
        )
        conn.executemany(
            "INSERT INTO issues (id, project, number, title, body, state, assignee, reporter, labels, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            issue_rows,
        )
        conn.executemany("INSERT INTO comments (issue_id, author, body, created_at) VALUES (?, ?, ?, ?)", comment_rows)
        conn.execute("COMMIT")
        return issues
    finally:
        conn.close()
