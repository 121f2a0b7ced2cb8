"""Checkpoints: the SQLite checkpointer factory and legal action boundaries."""

from branchpoint.checkpoints.boundaries import BoundaryInfo, list_boundaries
from branchpoint.checkpoints.store import open_checkpointer, sqlite_checkpointer

__all__ = ["BoundaryInfo", "list_boundaries", "open_checkpointer", "sqlite_checkpointer"]
