"""The ``agentsteps`` command line; ``main`` is the console script."""

from .main import main

__all__ = ["main"]
