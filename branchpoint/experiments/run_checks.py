"""The checks that can refuse a run before anything is written: the run folder, the models and the
retrieval sources of the planned executions."""

from __future__ import annotations

from collections.abc import Iterable

from branchpoint.experiments.planning import PlannedExecution
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.store import RunStore
from branchpoint.models.factory import check_planned_questions
from branchpoint.traces import RETRIEVAL_CACHE_FILE, SPEC_FILE


def check_run_dir(store: RunStore, spec: ExperimentSpec, checkpoints: str | None) -> None:
    """Everything about the run folder that can refuse a run, read-only (before the first write):
    it holds no other spec's run (`check_same_run`), its files are files, its databases are
    readable, and its checkpoints are there if its records list any (`check_saved_states`)."""
    from branchpoint.dbfiles import CACHE_HINT, CHECKPOINTS_HINT, check_run_files, probe
    from branchpoint.experiments.spec import check_same_run, load_spec

    recorded = store.run_dir / SPEC_FILE
    if recorded.is_file():
        check_same_run(load_spec(recorded, check_policy=False, recorded=True), spec, store.run_dir)
    check_run_files(store.run_dir)
    if checkpoints is None:
        probe(store.checkpoints_path, "checkpoint database", CHECKPOINTS_HINT, ("checkpoints", "writes"))
    probe(store.run_dir / RETRIEVAL_CACHE_FILE, "retrieval cache", CACHE_HINT, ("retrieval_cache",))
    store.check_saved_states(checkpoints)


def check_models(planned: Iterable[PlannedExecution]) -> None:
    """Each condition's model can be opened as far as the spec says (a `base_url` for provider
    openai, the API key's variable set: `ModelSpec.check_ready`), and a simulated model knows
    every planned question: refused before anything is written."""
    planned = list(planned)
    for spec in {id(p.spec): p.spec for p in planned}.values():
        spec.model.check_ready()
    check_planned_questions((p.spec.model, p.question) for p in planned)  # provider hooks (sim: by id)


def check_sources(todo: Iterable[PlannedExecution]) -> None:
    """Read every corpus the planned executions search, and check every saved index directory
    against it, and every FlashRAG index file (memory-mapped, not loaded), without loading an
    encoder or building anything (the check of the executors whose workers open the sources
    themselves): a corpus that is not JSON, not UTF-8 or empty, an index of another corpus, kind
    or build parameters, or a damaged index file, is an InputError before the run folder is
    written."""
    seen: set[str] = set()
    for spec in {id(p.spec): p.spec for p in todo}.values():  # one spec object per condition
        if not spec.agent.search:
            continue
        for source in spec.retrieval.sources.values():
            key = source.model_dump_json()
            if key not in seen:
                seen.add(key)
                source.check_data()
