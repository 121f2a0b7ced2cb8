"""A sampled audit's per-question facts: inclusion probabilities for the shared-label bounds, and
source support for the source-supported subset (search-value study, Appendix C).

The audit file (`--audit-sample FILE`, the spec's `value.audit_sample`) is JSONL, one line per
audited question:

    {"question_id": "q17", "inclusion": 0.135, "source_supported": true}

- `inclusion` (optional, in (0, 1], default 1): the probability the question entered the audit
  ("Flagged-question and original grader-disagreement cases have inclusion probability one.
  Other answers inherit their question's inclusion probability 32/237"). With a file, only the
  questions it lists are audited: the answers of the others keep their original labels (no
  label interval, no correction), and the listed ones' corrections are weighted by 1/π
  (`audit.shared_label_bounds(inclusion=…)`, Horvitz–Thompson), with the audit-sampling
  standard error reported separately from the component bootstrap.
- `source_supported` (optional, true / false): whether a source-only audit found the reference
  answer supported by the question's sources ("The supported subset of the original 400
  questions uses the pre-existing source-only audit and contains 270 questions"). When any line
  has it, value.json's `source_supported` scores the test states of supported questions alone
  (questions the file does not mark are left out of the subset), beside the full cohort:
  "Conditioning on source support changes the evaluated population, so these estimates
  supplement the original full-cohort analysis."

A bad line (not JSON, no `question_id`, an inclusion outside (0, 1], a support that is not a
boolean) is an InputError naming the file, line and field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.forecasters import Forecast
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.traces import TraceError, iter_json_lines


@dataclass(frozen=True)
class AuditSample:
    """Per audited question: its inclusion probability and (where the file says) source support."""

    path: str
    inclusion: dict[str, float] = field(default_factory=dict)
    supported: dict[str, bool] = field(default_factory=dict)

    def audited(self, question_ids: Sequence[str]) -> np.ndarray:
        """Per row: whether its question is in the audit."""
        return np.array([str(q) in self.inclusion for q in question_ids], dtype=bool)

    def inclusion_of(self, question_ids: Sequence[str]) -> np.ndarray:
        """Per row: its question's inclusion probability (1 where not audited: those rows carry no
        correction, so the value does not enter)."""
        return np.array([self.inclusion.get(str(q), 1.0) for q in question_ids], dtype=float)

    def supported_mask(self, question_ids: Sequence[str]) -> np.ndarray:
        """Per row: whether its question is marked source-supported."""
        return np.array([self.supported.get(str(q), False) for q in question_ids], dtype=bool)

    def unknown(self, question_ids: Sequence[str]) -> list[str]:
        """Questions of the file that the study does not have."""
        known = {str(q) for q in question_ids}
        return sorted(q for q in self.inclusion if q not in known)


def read_audit_sample(path: Path) -> AuditSample:
    """The audit file at `path` (module doc); InputError on a bad line, naming file, line, field."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: audit sample file not found")
    try:
        lines = list(iter_json_lines(path))
    except TraceError as exc:
        raise InputError(str(exc)) from None
    if not lines:
        raise InputError(f'{path}: no audited questions (expected one {{"question_id", "inclusion"}} object per line)')
    inclusion: dict[str, float] = {}
    supported: dict[str, bool] = {}
    for lineno, obj in lines:
        if not isinstance(obj, dict):
            raise InputError(f'{path} line {lineno}: expected an object {{"question_id", "inclusion"}}')
        qid = obj.get("question_id")
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid) == "":
            raise InputError(f'{path} line {lineno}: field "question_id" missing or not a string')
        pi = obj.get("inclusion", 1.0)
        if isinstance(pi, bool) or not isinstance(pi, (int, float)) or not 0.0 < float(pi) <= 1.0:
            raise InputError(f'{path} line {lineno}: field "inclusion" must be a probability in (0, 1], got {pi!r}')
        inclusion[str(qid)] = float(pi)
        if "source_supported" in obj:
            flag = obj["source_supported"]
            if not isinstance(flag, bool):
                raise InputError(f'{path} line {lineno}: field "source_supported" must be true or false, got {flag!r}')
            supported[str(qid)] = flag
    return AuditSample(str(path), inclusion, supported)


def source_supported_section(
    states: StateTable,
    dev: np.ndarray,
    forecasts: Mapping[str, Forecast],
    config: ValueConfig,
    sample: AuditSample,
) -> dict[str, Any]:
    """value.json's `source_supported`: every forecaster's Brier, gain risk L and R²_Δ, with
    their component-bootstrap intervals, and the paired differences, on the test states whose
    question the audit marks source-supported (search-value study, Appendix C: "Its Brier values
    are 0.1796 for global means, 0.1637 for stratum means, and 0.1634 for the map"). The
    forecasts are the full study's (fitted on the same dev rows); only the scored population
    changes."""
    from branchpoint.evaluation.value.scoring import score

    dev = np.asarray(dev, dtype=bool)
    test = ~dev if dev.any() else np.ones(len(states), dtype=bool)
    supported = test & sample.supported_mask(states.question_id)
    if not supported.any():
        return {"skipped": f"{sample.path}: no test state's question is marked source_supported: true"}
    idx = np.flatnonzero(dev | supported)
    sub = states.rows(idx)
    fcs = {name: Forecast(fc.q_think[idx], fc.q_search[idx]) for name, fc in forecasts.items()}
    res = score(sub, dev[idx], fcs, config.model_copy(update={"prices": (0.0,)}))
    iv = res["intervals"]
    return {
        "file": sample.path,
        "test_questions": len({states.question_id[i] for i in np.flatnonzero(supported)}),
        "test_states": int(supported.sum()),
        "of_test_states": int(test.sum()),
        "note": "conditioning on source support changes the evaluated population: these scores supplement "
        "the full-cohort ones",
        "brier": {n: {"value": res["brier"][n]["brier"], "interval": iv["brier"].get(n)} for n in fcs},
        "gain_risk": {n: {"value": res["gain_risk"][n], "interval": iv["gain_risk"].get(n)} for n in fcs},
        "gain_r2": {n: {"value": res["gain_r2"][n], "interval": iv["gain_r2"].get(n)} for n in fcs},
        "paired": res["paired"],
        "warnings": res["warnings"],
    }
