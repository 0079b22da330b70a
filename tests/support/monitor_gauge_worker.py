"""A worker process that runs only ``monitor.record``, with its own ``/metrics``: one of the gauge test's two workers.

Usage: monitor_gauge_worker.py TEMPORAL_ADDRESS NAMESPACE TASK_QUEUE. Prints
``ready`` and then the metrics port; runs until killed (``child_main``).
"""

from __future__ import annotations

import sys

from child_main import run_child, serve_until_killed
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from agentsteps.activities.monitor.activities import MonitorActivities
from agentsteps.telemetry.runtime import build_runtime
from agentsteps.telemetry.server import start_metrics_server


async def main(address: str, namespace: str, task_queue: str) -> None:
    client = await Client.connect(
        address, namespace=namespace, data_converter=pydantic_data_converter, runtime=build_runtime()
    )
    server = start_metrics_server(0, host="127.0.0.1")
    async with Worker(client, task_queue=task_queue, activities=MonitorActivities().activities()):
        await serve_until_killed(server.port)


if __name__ == "__main__":
    run_child(main, *sys.argv[1:4])
