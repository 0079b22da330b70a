"""What a backend (and the CLI) uses to drive agentsteps from outside the worker:
starting runs, schedules, the embedded dev server, and reading spec, pipeline
and config files (``settings.load_settings`` is the one settings loader)."""

from .forks import fork_run
from .runs import follow, start_agent_run, validate_spec
from .scripts import run_and_exit
from .settings import load_settings
from .spec_files import load_spec, parse_spec

__all__ = [
    "follow",
    "fork_run",
    "load_settings",
    "load_spec",
    "parse_spec",
    "run_and_exit",
    "start_agent_run",
    "validate_spec",
]
