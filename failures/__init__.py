"""The one seam between the error tree (``contracts/errors.py``) and Temporal's failures."""

from .seam import failure_type, from_failure, to_application_error, tree

__all__ = ["failure_type", "from_failure", "to_application_error", "tree"]
