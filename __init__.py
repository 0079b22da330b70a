"""agentsteps: a durable engine for LLM agent steps on Temporal.

The public API is the modules in ``PUBLIC_MODULES``, each exporting the names in its ``__all__``
(docs/api.md lists the same; ``tests/repo/test_exported_members.py`` holds the two together). Everything
else is internal and may change in any release. Importing this package imports none of them.
"""


def __getattr__(name: str) -> str:
    # ``__version__`` is read when asked for: importlib.metadata costs a command that never prints it
    # (``agentsteps --help``) a third of its start-up.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        # One source of truth: the version in pyproject.toml, as installed.
        found = version("agentsteps")
    except PackageNotFoundError:  # a source tree put on sys.path without installing it
        found = "0+unknown"
    globals()["__version__"] = found
    return found


PUBLIC_MODULES = (
    "agentsteps",
    "agentsteps.activities.tools",
    "agentsteps.client",
    "agentsteps.client.dev_server",
    "agentsteps.client.quotas",
    "agentsteps.client.schedules",
    "agentsteps.client.session_forks",
    "agentsteps.client.session_stream",
    "agentsteps.client.sessions",
    "agentsteps.client.transcript",
    "agentsteps.contracts",
    "agentsteps.contracts.approvals",
    "agentsteps.contracts.composition.pipeline_spec",
    "agentsteps.contracts.config.mcp_config",
    "agentsteps.contracts.config.schedules",
    "agentsteps.contracts.config.settings",
    "agentsteps.contracts.errors",
    "agentsteps.contracts.mcp",
    "agentsteps.contracts.monitor",
    "agentsteps.contracts.names",
    "agentsteps.contracts.session",
    "agentsteps.scripted_model",
    "agentsteps.worker",
)

__all__ = ["PUBLIC_MODULES", "__version__"]
