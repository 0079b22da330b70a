"""``tools.*``: the Python tool registry, the tool-source seam MCP plugs into, and the activity that runs a call."""

from .activities import ToolActivities
from .registry import PythonTool, ToolContext, ToolRegistry
from .source import ToolSource

__all__ = ["PythonTool", "ToolActivities", "ToolContext", "ToolRegistry", "ToolSource"]
