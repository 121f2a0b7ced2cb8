"""Experiments: specs, question sets, the run store and the runner."""

from branchpoint.experiments.loaders import balanced_sample, load_questions
from branchpoint.experiments.questions import Question
from branchpoint.experiments.runner import RunSummary, run_experiment
from branchpoint.experiments.spec import ExperimentSpec, expand_conditions, load_spec
from branchpoint.experiments.store import RunStore

__all__ = [
    "ExperimentSpec",
    "Question",
    "RunStore",
    "RunSummary",
    "balanced_sample",
    "expand_conditions",
    "load_questions",
    "load_spec",
    "run_experiment",
]
