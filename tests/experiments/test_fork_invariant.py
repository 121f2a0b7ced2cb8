"""The fork invariant: a branch's first model request is the request its parent would have sent at
that checkpoint had it taken the branch's action — for every policy style and prompt variant.

Every policy runs against a request-logging OpenAI-compatible server (tests/servers/agent_server.py)
whose replies are a function of the request, so paths are deterministic. The oracle for each
(boundary, action) is a request some *parent* actually sent, never the fork code's own prompt
builder, wherever a parent can send it:

- SEARCH at `initial` / `after_search_k`: the parent's next request at that state;
- THINK at `after_search_k`: the forced answer of a parent whose search cap is k;
- SEARCH (SAME) at a pending query: the parent's request after running it;
- SWITCH at the first pending query: the request of a parent whose default source is the other one;
- STOP at a pending query with k searches done: THINK at `after_search_k`.

THINK / STOP with no evidence at all are compared with the policy's forced answer applied to the
saved state (no evidence can be lost there); SWITCH at the second pending query splices the other
source's results (from the other-source parent) into the parent's request after two searches.
"""

from __future__ import annotations

import textwrap

import pytest
import yaml

from branchpoint.agents import resolve_policy
from branchpoint.agents.prompts import evidence_lines
from branchpoint.checkpoints import list_boundaries, sqlite_checkpointer
from branchpoint.checkpoints.values import checkpoint_values
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.runner import agent_context
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.models import open_model
from tests.servers.agent_server import agent_server

USER_POLICY = textwrap.dedent('''
    from branchpoint.agents import Decision, apply_decision, policy
    from branchpoint.agents.policies import fewshot_decision


    @policy("search_first")
    def search_first(state, runtime):
        """Always search the question verbatim first, then let the few-shot model decide."""
        ctx = runtime.context
        if state["searches"] == 0 and ctx.offers_search:
            return apply_decision(state, Decision("search", state["question"]), ctx)
        return apply_decision(state, fewshot_decision(state, ctx, allow_search=ctx.offers_search), ctx)
''')

#: (policy, endpoint style, prompt variant[, provider]): every registered policy, the prompt
#: variants, a user policy written as the README shows (a module next to the spec), over the
#: OpenAI-compatible client and (chat policies) a LangChain chat model (`provider: langchain`).
CASES = [
    ("constrained", "completion", "abstention"),
    ("native", "chat", "abstention"),
    ("native", "chat", "plain"),
    ("native", "chat", "fewshot"),
    ("native", "chat", "self_eval"),
    ("tagged", "chat", "abstention"),
    ("tagged", "chat", "plain"),
    ("tagged", "chat", "fewshot"),
    ("tagged", "chat", "self_eval"),
    ("no_search", "chat", "abstention"),
    ("no_search", "chat", "self_eval"),
    ("invariant_policies:search_first", "completion", "abstention"),
    ("native", "chat", "self_eval", "langchain"),
    ("tagged", "chat", "abstention", "langchain"),
    # Search-R1's rollout: one user prompt, the results inline in one continued assistant sequence
    ("tagged", "chat", "abstention", "openai", "searchr1"),
    ("tagged", "chat", "abstention", "langchain", "searchr1"),
]


def view(body: dict) -> dict:
    """What makes two requests the same request: the prompt or messages, the tools offered, the
    grammar, stops and token limit (not the sampling settings, which a branch draws itself)."""
    if "messages" in body:
        tools = [t["function"]["name"] for t in body.get("tools") or []]
        return {"messages": body["messages"], "tools": tools, "max_tokens": body.get("max_tokens")}
    prompt = body["prompt"][0] if isinstance(body["prompt"], list) else body["prompt"]
    return {"prompt": prompt, **{k: body.get(k) for k in ("grammar", "stop", "max_tokens")}}


def model_requests(server) -> list[dict]:
    return [b for p, b in server.requests if p.endswith(("/chat/completions", "/completions"))]


class Study:
    """Parents of one policy at several search caps and sources, all logged by one server."""

    def __init__(
        self, tmp_path, server, policy: str, style: str, prompt: str, provider: str, protocol: str = "chat"
    ) -> None:
        self.tmp, self.server = tmp_path, server
        self.policy, self.style, self.prompt, self.provider = policy, style, prompt, provider
        self.protocol = protocol
        self.folder = tmp_path / "specs"
        self.folder.mkdir(exist_ok=True)
        (self.folder / "invariant_policies.py").write_text(USER_POLICY)

    def spec_path(self, cap: int, source: str):
        data = {
            "name": "invariant",
            "questions": {"path": "demo", "categories": ["answerable"], "limit": 1},
            "model": {
                "provider": "openai",
                "base_url": self.server.base_url,
                "name": "m",
                "style": self.style,
                "max_tokens": 32,
            }
            if self.provider == "openai"
            else {
                "provider": "langchain",
                "name": "m",
                "style": "chat",
                "max_tokens": 32,
                "factory": "langchain_openai:ChatOpenAI",
                "options": {"model": "m", "base_url": self.server.base_url, "api_key": "not-needed", "max_retries": 0},
            },
            "agent": {
                "policy": self.policy,
                "prompt": self.prompt,
                "search_cap": cap,
                "top_k": 2,
                **({"protocol": self.protocol} if self.protocol != "chat" else {}),
            },
            "retrieval": {
                "default": source,
                "sources": {"demo": {"corpus": "demo"}, "demo_chunks": {"corpus": "demo", "chunk_words": 12}},
            },
            "sweep": {},
        }
        path = self.folder / f"cap{cap}-{source}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    def parent(self, cap: int, source: str = "demo"):
        """Run a parent; return its run dir and the requests it sent, in order."""
        run_dir = self.tmp / f"run-cap{cap}-{source}"
        self.server.clear()
        run_experiment(load_spec(self.spec_path(cap, source)), run_dir, progress=False)
        return run_dir, model_requests(self.server)


def forced_answer_request(server, run_dir, checkpoint_id: str) -> dict:
    """The request the policy's forced answer sends from a saved state (the prompt builder applied
    to the checkpoint's state), through the run's real client, as the server received it."""
    spec = load_spec(run_dir / "spec.yaml")
    [record] = RunStore(run_dir).records()
    pool = SourcePool(progress=False)
    server.clear()
    try:
        with sqlite_checkpointer(run_dir / "checkpoints.sqlite") as saver:
            values = checkpoint_values(saver, record.execution_id, checkpoint_id)
        with open_model(spec.model) as client:
            resolve_policy(spec.agent.policy).force_answer(values, agent_context(spec, client, pool))
    finally:
        pool.close()
    return model_requests(server)[0]


@pytest.mark.parametrize("case", CASES, ids=["-".join(c[:1] + c[2:]) for c in CASES])
def test_branch_first_request_is_the_parents_request(case, tmp_path, isolated_cache, monkeypatch):
    policy, style, prompt, provider, protocol = (*case, *("openai", "chat")[len(case) - 3 :])
    with agent_server() as server:
        study = Study(tmp_path, server, policy, style, prompt, provider, protocol)
        # run from the folder that holds the user's policy module, as the README says
        monkeypatch.chdir(study.folder)
        main_dir, main = study.parent(2)
        # where decide request j sits in a parent's requests: after the self-evaluation call; the
        # user policy's first decision (search the question verbatim) makes no model call
        offset = 1 if prompt == "self_eval" else -1 if ":" in policy else 0
        searches = policy != "no_search"
        if searches:
            _, cap1 = study.parent(1)
            _, cap3 = study.parent(3)
            chunks_dir, chunks = study.parent(2, "demo_chunks")
        server.clear()
        plan = ForkPlan(
            actions=["THINK", "SEARCH", "STOP", "SWITCH"],
            repeats=1,
            search_budget=2,
            switch_source="demo_chunks",
            concurrency=1,
        )
        summary = fork_run(main_dir, plan, progress=False)
        forked = model_requests(server)
        branches = fork_records(main_dir)
        with sqlite_checkpointer(main_dir / "checkpoints.sqlite") as saver:
            [parent] = RunStore(main_dir).records()
            bounds = list_boundaries(saver, parent.execution_id)

        first = {}
        for rec in branches:
            seed = rec.sampling["seed"]
            mine = [b for b in forked if b.get("seed") == seed]
            assert mine, f"no request with branch seed {seed}"
            assert mine[0]["temperature"] == 0.6 and mine[0]["top_p"] == 0.95, mine[0]
            pending_k = (
                [b for b in bounds if b.kind == "pending_query"].index(
                    next(b for b in bounds if b.checkpoint_id == rec.parent.checkpoint_id)
                )
                if rec.parent.boundary == "pending_query"
                else None
            )
            key = (rec.parent.boundary if pending_k is None else f"pending_{pending_k + 1}", rec.branch)
            first[key] = view(mine[0])

        initial = next(b for b in bounds if b.boundary == "initial")
        think_initial = view(forced_answer_request(server, main_dir, initial.checkpoint_id))
        if not searches:
            assert set(first) == {("initial", "THINK")}
            assert summary.illegal_skipped.get("SEARCH@no-search") == 1
            assert first[("initial", "THINK")] == think_initial
            return

        def d(reqs, j):  # the decide request with j searches done
            return view(reqs[offset + j])

        def f(reqs, k):  # the forced answer after k searches (the search cap)
            return view(reqs[offset + k])

        expected = {
            ("initial", "THINK"): think_initial,
            ("initial", "SEARCH"): view(main[0]),
            ("after_search_1", "THINK"): f(cap1, 1),
            ("after_search_1", "SEARCH"): d(main, 1),
            ("after_search_2", "THINK"): f(main, 2),
            ("after_search_2", "SEARCH"): d(cap3, 2),
            ("pending_1", "STOP"): think_initial,
            ("pending_1", "SEARCH"): d(main, 1),
            ("pending_1", "SWITCH"): d(chunks, 1),
            ("pending_2", "STOP"): f(cap1, 1),
            ("pending_2", "SEARCH"): d(cap3, 2),
            ("pending_2", "SWITCH"): switched_second_search(d(cap3, 2), f(chunks, 2), main_dir, chunks_dir, bounds),
        }
        assert set(first) == set(expected)
        for key, want in expected.items():
            assert first[key] == want, f"{policy}/{prompt}: {key} sent another request than its parent would"
        # and the evidence really is there: THINK at after_search_2 shows every passage in hand
        after2 = next(b for b in bounds if b.boundary == "after_search_2")
        with sqlite_checkpointer(main_dir / "checkpoints.sqlite") as saver:
            evidence = checkpoint_values(saver, parent.execution_id, after2.checkpoint_id)["evidence"]
        shown = str(first[("after_search_2", "THINK")])
        assert len(evidence) == 4 and all(" ".join(doc["text"].split()[:6]) in shown for doc in evidence)


def _last_result(messages: list[dict]) -> int:
    return max(
        i for i, m in enumerate(messages) if m["role"] == "tool" or str(m["content"]).startswith("<information>")
    )


def switched_second_search(base: dict, forced_chunks: dict, main_dir, chunks_dir, bounds) -> dict:
    """The request after the first search on the default source and the second on the other one:
    `base` (the parent's request after two searches) with the second search's results taken from
    the other-source parent (its result message for chat; its passages for completion prompts)."""
    if "messages" in base and base["messages"][-1]["role"] == "assistant":  # searchr1: blocks inline
        sequence, other = base["messages"][-1]["content"], forced_chunks["messages"][-1]["content"]
        head = sequence[: sequence.rindex("<information>")]
        tail = sequence[sequence.rindex("</information>") :]
        block = other[other.rindex("<information>") : other.rindex("</information>")]
        return {**base, "messages": [*base["messages"][:-1], {**base["messages"][-1], "content": head + block + tail}]}
    if "messages" in base:
        messages = list(base["messages"])
        messages[_last_result(messages)] = forced_chunks["messages"][_last_result(forced_chunks["messages"])]
        return {**base, "messages": messages}
    with sqlite_checkpointer(main_dir / "checkpoints.sqlite") as saver:
        [rec] = RunStore(main_dir).records()
        after1 = next(b for b in bounds if b.boundary == "after_search_1")
        main_values = checkpoint_values(saver, rec.execution_id, after1.checkpoint_id)
    with sqlite_checkpointer(chunks_dir / "checkpoints.sqlite") as saver:
        [crec] = RunStore(chunks_dir).records()
        after2 = next(b for b in list_boundaries(saver, crec.execution_id) if b.boundary == "after_search_2")
        chunk_values = checkpoint_values(saver, crec.execution_id, after2.checkpoint_id)
    second = chunk_values["transcript"][1]
    docs = chunk_values["evidence"][second["evidence_start"] : second["evidence_start"] + second["evidence_count"]]
    head, block = base["prompt"].rsplit("Question: ", 1)  # a `view`
    lines = evidence_lines(main_values["evidence"] + docs, 60)
    block = "\n".join(
        "Evidence: " + " ".join(lines) if line.startswith("Evidence: ") else line for line in block.split("\n")
    )
    return {**base, "prompt": f"{head}Question: {block}"}
