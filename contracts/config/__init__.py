"""File and settings formats the worker and CLI read: ``settings`` (the
worker's typed settings), ``mcp_config`` (MCP servers) and ``schedules``
(schedule files). Types only; loading them is I/O and lives outside contracts.
"""
