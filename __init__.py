"""agentsteps: a durable engine for LLM agent steps on Temporal."""

__version__ = "0.1.0"
