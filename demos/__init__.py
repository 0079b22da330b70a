"""What ``agentsteps demo`` runs: an agent run, a code-mode run and a monitor tick."""

from .agent_run import run_demo
from .code_mode import demo_code_mode_run
from .monitor import demo_monitor_tick

__all__ = ["demo_code_mode_run", "demo_monitor_tick", "run_demo"]
