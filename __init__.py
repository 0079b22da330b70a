"""agentsteps: a durable engine for LLM agent steps on Temporal."""

from importlib.metadata import PackageNotFoundError, version

try:
    # One source of truth: the version in pyproject.toml, as installed.
    __version__ = version("agentsteps")
except PackageNotFoundError:  # a source tree put on sys.path without installing it
    __version__ = "0+unknown"

del PackageNotFoundError, version
