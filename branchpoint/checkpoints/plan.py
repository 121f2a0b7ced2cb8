"""The boundary kinds a fork plan selects (the plan itself, `ForkPlan`, is a spec section:
`branchpoint.experiments.spec.fork`)."""

from __future__ import annotations

BOUNDARY_KINDS = ("initial", "after_search_k", "pending_query")
