"""``agentsteps payloads gc``: the shell over ``client/payload_gc.py``."""

from __future__ import annotations

import argparse
import asyncio
from datetime import datetime, timezone

from .json_output import PAYLOADS_GC, print_json


def payloads_gc(args: argparse.Namespace) -> int:
    # The cutoff is taken here, at the command's own start: loading, connecting and listing take seconds,
    # and an object written meanwhile is newer than the cutoff (docs/deployment.md#payload-retention).
    started = datetime.now(timezone.utc)
    return asyncio.run(_gc(args, started))


async def _gc(args: argparse.Namespace, started: datetime) -> int:
    from ..client.connection import connect
    from ..client.payload_gc import collect_garbage
    from ..client.settings import load_settings
    from ..storage.payload_store import build_payload_store

    settings = load_settings(getattr(args, "config", None))
    store = build_payload_store(settings)
    try:
        client = await connect(settings)
        report = await collect_garbage(client, store, args.older_than, delete=args.delete, now=started)
    finally:
        await store.aclose()
    if args.json:
        print_json(PAYLOADS_GC, report.as_json(), indent=None)
    else:
        print(report.summary())
    # Garbage the store would not delete is kept and reported; a scheduled run must notice it.
    return 1 if report.failed else 0
