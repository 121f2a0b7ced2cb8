"""The viewer's JSON API, one handler per route under `/api/`: the run list and one run's summary,
table rows (paged, refreshed from a running run), one execution's timeline, and its fork tree.

Every handler reads the `ViewerState` the app was made with (`viewer_state`) and answers JSON with
`Cache-Control: no-store` (a running run changes under the page). A request names its run with
`?run=K` (default 0); a run not shown, or a `since` / `limit` that is not a whole number, is a 400
`{"error": ...}`, and an execution the run does not have is a 404 `{"error": "no execution ..."}`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from branchpoint.evaluation.viewer.index import RunIndex
from branchpoint.evaluation.viewer.state import ViewerState
from branchpoint.evaluation.viewer.views import execution_view, json_safe, tree_view


def json_response(data: Any, status: int = 200) -> JSONResponse:
    """`data` as JSON (NaN as null, ±inf as strings, as in metrics.json), never cached."""
    return JSONResponse(json_safe(data), status_code=status, headers={"Cache-Control": "no-store"})


def viewer_state(request: Request) -> ViewerState:
    """The runs the app answers from (set by `server.create_app`)."""
    state: ViewerState = request.app.state.viewer
    return state


def requested_run(request: Request) -> tuple[int, RunIndex]:
    """The run a request names (`?run=K`, default 0) and its index; ValueError when none such."""
    return viewer_state(request).run_named(request.query_params.get("run", "0"))


def no_execution(index: RunIndex, execution_id: str) -> Response:
    """The 404 for an execution id the run does not have."""
    return json_response({"error": f"no execution {execution_id} in {index.run_dir}"}, 404)


async def run_summary(request: Request) -> Response:
    """`/api/run`: one run's folder, files, judge, weights, headline metrics and value scores,
    its forecast problems, its position `run`, and how many runs are shown (`runs`)."""
    state = viewer_state(request)
    try:
        k, _ = requested_run(request)
    except ValueError as exc:
        return json_response({"error": str(exc)}, 400)
    return json_response({**state.summary(k), "runs": len(state.runs)})


async def run_list(request: Request) -> Response:
    """`/api/runs`: every run's summary, in the order shown."""
    state = viewer_state(request)
    return json_response({"runs": [state.summary(k) for k in range(len(state.runs))]})


async def rows(request: Request) -> Response:
    """`/api/rows?since=N&limit=M`: table rows from position N (default 0, negative as 0), at most
    M (at least 1; default all), with indexing progress and unreadable lines. A running run's
    lines appended since the last call are read first."""
    try:
        _, index = requested_run(request)
    except ValueError as exc:
        return json_response({"error": str(exc)}, 400)
    try:
        since = max(0, int(request.query_params.get("since", "0")))
        limit = request.query_params.get("limit")
        size = None if limit is None else max(1, int(limit))
    except ValueError:
        return json_response({"error": "since, limit: expected whole numbers"}, 400)
    index.refresh()  # a running run: the lines written since the last look
    return json_response(index.rows(since, size))


async def execution(request: Request) -> Response:
    """`/api/execution/{id}`: one execution's timeline, each model step with its request as sent
    and reply as received, its judgments and cost."""
    try:
        _, index = requested_run(request)
    except ValueError as exc:
        return json_response({"error": str(exc)}, 400)
    execution_id = request.path_params["id"]
    try:
        return json_response(execution_view(index, execution_id))
    except KeyError:
        return no_execution(index, execution_id)


async def fork_tree(request: Request) -> Response:
    """`/api/tree/{id}`: one execution's saved states and their branches, with success rates,
    Δ and the run's forecasts for each state."""
    try:
        k, index = requested_run(request)
    except ValueError as exc:
        return json_response({"error": str(exc)}, 400)
    execution_id = request.path_params["id"]
    try:
        return json_response(tree_view(index, execution_id, viewer_state(request).forecasts(k)[0]))
    except KeyError:
        return no_execution(index, execution_id)
