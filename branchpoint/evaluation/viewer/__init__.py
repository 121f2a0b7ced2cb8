"""The run viewer: a local page (or a static export) showing a run's executions, their timelines
with checkpoints, and fork trees. It reads traces only (the trace contract in `branchpoint.traces`
and the evaluation's outputs), never a checkpoint database, and imports nothing from agents."""

from branchpoint.evaluation.viewer.files import check_run_dir
from branchpoint.evaluation.viewer.index import RunIndex
from branchpoint.evaluation.viewer.server import bind, create_app, make_server, url_of
from branchpoint.evaluation.viewer.state import ViewerState

__all__ = ["RunIndex", "ViewerState", "bind", "check_run_dir", "create_app", "make_server", "url_of"]
