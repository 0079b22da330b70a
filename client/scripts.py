"""Ending a short script that used a Temporal client, with its own exit status.

A process that used a Temporal client can abort while the interpreter
finalizes: the SDK's Rust threads outlive it and release the GIL too late
("Fatal Python error: PyGILState_Release", SIGABRT or SIGSEGV), turning a
script that did its work into a crash, about one run in several here
(temporalio/sdk-python issue #300, open). The CLI ends every command with
``os._exit``; ``run_and_exit`` does the same for a script: ``asyncio.run``,
flush, exit with the script's status. A long-running service does not need it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Coroutine
from typing import Any, NoReturn


def run_and_exit(main: Coroutine[Any, Any, object]) -> NoReturn:
    """``asyncio.run(main)``, then end the process: 0, 1 after an exception (its traceback printed), 130 on Ctrl-C,
    or a ``SystemExit``'s code. ``atexit`` handlers do not run: call it last."""
    try:
        asyncio.run(main)
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        status = 130
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


__all__ = ["run_and_exit"]
