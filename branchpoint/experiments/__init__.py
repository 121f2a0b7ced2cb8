"""Experiments: specs, the run store and the runner (question sets are in `branchpoint.datasets`)."""

from branchpoint.experiments.runner import RunSummary, run_experiment
from branchpoint.experiments.spec import ExperimentSpec, expand_conditions, load_spec
from branchpoint.experiments.store import RunStore

__all__ = [
    "ExperimentSpec",
    "RunStore",
    "RunSummary",
    "expand_conditions",
    "load_spec",
    "run_experiment",
]
