"""``agentsteps payloads gc``: the shell over ``client/payload_gc.py``."""

from __future__ import annotations

import argparse
import asyncio

from .json_output import PAYLOADS_GC, print_json


def payloads_gc(args: argparse.Namespace) -> int:
    return asyncio.run(_gc(args))


async def _gc(args: argparse.Namespace) -> int:
    from ..client.payload_gc import collect_garbage
    from ..client.settings import load_settings
    from ..storage.payload_store import build_payload_store
    from ..worker import connect

    settings = load_settings(getattr(args, "config", None))
    store = build_payload_store(settings)
    try:
        client = await connect(settings)
        report = await collect_garbage(client, store, args.older_than, delete=args.delete)
    finally:
        await store.aclose()
    if args.json:
        print_json(PAYLOADS_GC, report.as_json(), indent=None)
    else:
        print(report.summary())
    return 0
