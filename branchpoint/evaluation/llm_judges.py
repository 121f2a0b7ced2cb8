"""LLM judges: versioned prompts, a strict reply format parsed robustly, retries, a persistent cache.

Two judges are registered here as factories over a model spec (`build_judge`): `llm` (answer,
abstention and evidence judgments) and `llm-answer` (answer and abstention only, unless
`evidence: true`), both taking `LLMJudgeSettings` (`model: {name, base_url, api_key_env}`,
`retries`, `concurrency`, `evidence`, `max_tokens`).

An `LLMJudge` (its prompts and reply parsing in `llm_judge_prompts`) talks to any OpenAI-compatible
endpoint through the same client as the agents
(`branchpoint.models`), one chat call per item:

- answerable records get one `answer` judgment (CORRECT / INCORRECT / NOT_ATTEMPTED) from
  `ANSWER_PROMPT_V1`: hedged answers that contain a gold answer are CORRECT, contradictions are
  INCORRECT, "I don't know" or no answer is NOT_ATTEMPTED;
- unanswerable records get one `abstention` judgment (ABSTAINED / ANSWERED) from
  `ABSTENTION_PROMPT_V1`, which spells out the scenarios: unknown answers, underspecified
  questions (asking for clarification or giving several readings counts), false premises
  (questioning or correcting the premise counts, answering the flawed question does not) and
  search (stopping and saying the question cannot be answered counts);
- and, unless `evidence=False`, one `evidence` judgment per distinct retrieved document
  (POSITIVE / NEGATIVE, `EVIDENCE_PROMPT_V1` for unanswerable questions and
  `EVIDENCE_ANSWERABLE_PROMPT_V1`, the same criteria without saying the question cannot be
  answered, for answerable ones: the study's negative-evidence share is reported for both),
  with the document's `doc_id` on the judgment.

No call is made where the outcome is fixed by the trace, exactly as in the rule judge: status
`malformed` / `length` → INCORRECT / ANSWERED; an empty answer → NOT_ATTEMPTED / ABSTAINED
(ANSWERED unless status ok); status `incomplete` → no judgment (the metrics skip it anyway).

Every prompt asks for a final line `LABEL: <LABEL>`. `parse_label` takes the last line of that
form naming exactly one valid label (markdown, case, spaces and `<think>` blocks tolerated), or
a reply that is nothing but one label. An unparseable reply is asked again (`retries`, default
1) with the bad reply and a reminder of the format in the conversation; if it still does not
parse, the judgment is recorded with label `UNPARSEABLE` and its raw text, and the metrics leave
it out and count it (`n_unparseable`).

Judgments are cached by (prompt version, model name, inputs) in a `JudgeCache`; identical items
(the same document retrieved for the same question under several conditions) are judged once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from branchpoint.evaluation.judge_cache import JudgeCache, judgment_key
from branchpoint.evaluation.judges import (
    BROKEN_STATUSES,
    UNPARSEABLE,
    JudgeRun,
    evidence_documents,
    judge,
)
from branchpoint.evaluation.llm_judge_prompts import DEFAULT_PROMPTS, RETRY_MESSAGE, SCENARIOS, JudgePrompt, parse_label
from branchpoint.traces import ExecutionRecord, Judgment

if TYPE_CHECKING:  # the client (and langchain behind it) is imported only when a judge is opened
    from branchpoint.models.call import ModelClient


# --------------------------------------------------------------------------------------------
# The judge
# --------------------------------------------------------------------------------------------


@dataclass
class JudgeStats:
    """What one `judge_many` cost: model calls, items served from the cache, unparseable items."""

    items: int = 0
    cached: int = 0
    calls: int = 0
    unparseable: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: Model calls the response cache answered (`--cache`): no request sent.
    response_cache_hits: int = 0


@dataclass
class _Item:
    prompt: JudgePrompt
    inputs: dict[str, Any]
    key: str
    result: tuple[str, str | None, str | None] | None = None  # (label, raw reply, reasoning)


@dataclass
class _Slot:
    """One judgment of one record: either fixed by the trace or the result of an item."""

    kind: str
    fixed: tuple[str, str] | None = None  # (label, raw)
    key: str | None = None
    doc_id: str | None = None


class LLMJudge:
    """Answer, abstention and evidence judgments from a chat model (see the module docstring)."""

    def __init__(
        self,
        client: ModelClient,
        *,
        cache: JudgeCache | None = None,
        retries: int = 1,
        concurrency: int = 4,
        evidence: bool = True,
        max_tokens: int = 512,
        max_document_chars: int = 4000,
        prompts: dict[str, JudgePrompt] | None = None,
        name: str | None = None,
        progress: bool = False,
    ) -> None:
        if retries < 0 or concurrency < 1:
            raise ValueError("retries must be >= 0 and concurrency >= 1")
        self.client = client
        self.model = client.name
        self.name = name or f"llm:{client.name}"
        self.cache = cache if cache is not None else JudgeCache(None)
        self.retries = retries
        self.concurrency = concurrency
        self.evidence = evidence
        self.max_tokens = max_tokens
        self.max_document_chars = max_document_chars
        self.prompts = {**DEFAULT_PROMPTS, **(prompts or {})}
        self.progress = progress
        self.stats = JudgeStats()
        self._lock = threading.Lock()  # `ask` runs on the pool's threads

    # -- planning ---------------------------------------------------------------------------

    def _item(self, items: dict[str, _Item], kind: str, inputs: dict[str, Any]) -> str:
        prompt = self.prompts[kind]
        key = judgment_key(prompt.version, self.model, {"kind": kind, **inputs})
        items.setdefault(key, _Item(prompt, inputs, key))
        return key

    def _plan(self, record: ExecutionRecord, items: dict[str, _Item]) -> list[_Slot]:
        if record.status == "incomplete":
            return []
        answer = record.final_answer
        empty = answer is None or not answer.strip()
        kind = "answer" if record.answerable else "abstention"
        if record.status in BROKEN_STATUSES:
            label = "INCORRECT" if record.answerable else "ANSWERED"
            slots = [_Slot(kind, fixed=(label, f"status={record.status}"))]
        elif empty:
            label = "NOT_ATTEMPTED" if record.answerable else "ABSTAINED"
            slots = [_Slot(kind, fixed=(label, "empty"))]
        elif record.answerable and not record.gold_answers:
            slots = [_Slot(kind, fixed=(UNPARSEABLE, "no gold answers to judge against"))]
        elif record.answerable:
            inputs = {"question": record.question, "gold_answers": list(record.gold_answers), "response": answer}
            slots = [_Slot(kind, key=self._item(items, kind, inputs))]
        else:
            inputs = {
                "question": record.question,
                "scenario": SCENARIOS.get(record.category, SCENARIOS[None]),
                "response": answer,
            }
            slots = [_Slot(kind, key=self._item(items, kind, inputs))]
        if self.evidence:
            for doc in evidence_documents(record):
                text = f"{doc.title}\n{doc.text}" if doc.title else doc.text
                inputs = {"question": record.question, "document": text[: self.max_document_chars]}
                which = "evidence_answerable" if record.answerable else "evidence"
                slots.append(_Slot("evidence", key=self._item(items, which, inputs), doc_id=doc.doc_id))
        return slots

    # -- asking -----------------------------------------------------------------------------

    def ask(self, prompt: JudgePrompt, inputs: dict[str, Any]) -> tuple[str, str | None, str | None, int, int, int]:
        """(label, raw reply, reasoning text, calls, input tokens, output tokens) of the last
        call; label UNPARSEABLE after retries. The reasoning is what a reasoning model's server
        returned beside the reply (None when it returned none). Calls the response cache
        answered are counted in `stats.response_cache_hits`."""
        first = {"role": "user", "content": prompt.render(inputs)}
        messages: list[dict[str, Any]] = [first]
        calls = tokens_in = tokens_out = 0
        text: str | None = None
        reasoning: str | None = None
        for _ in range(self.retries + 1):
            call = self.client.chat(messages, max_tokens=self.max_tokens)
            if call.cache_hit:
                with self._lock:
                    self.stats.response_cache_hits += 1
            calls += 1
            tokens_in += call.usage.input_tokens
            tokens_out += call.usage.output_tokens
            text, reasoning = call.text, call.reasoning
            label = parse_label(text, prompt.labels)
            if label is not None:
                return label, text, reasoning, calls, tokens_in, tokens_out
            messages = [
                first,
                {"role": "assistant", "content": text or ""},
                {"role": "user", "content": RETRY_MESSAGE.format(labels=", ".join(prompt.labels))},
            ]
        return UNPARSEABLE, text, reasoning, calls, tokens_in, tokens_out

    def _check_reachable(self) -> None:
        """Fail at once, in one line, when the judge's server cannot be reached at all: one quick
        request finds a refused or timed-out connection before any judging, where every call would
        otherwise spend its transport retries on it."""
        base_url = getattr(self.client, "base_url", None)
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            return  # not an HTTP client (a scripted one in tests)
        import httpx

        from branchpoint.errors import ModelServerError
        from branchpoint.models.openai_transport import tls_context

        try:
            httpx.get(f"{base_url.rstrip('/')}/models", timeout=5.0, verify=tls_context())
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ModelServerError(
                f"LLM judge server {base_url}: cannot connect ({exc or type(exc).__name__}); check that the "
                "server is running and listening there (e.g. `branchpoint models serve vllm --model NAME --port "
                "PORT`) and that --judge-base-url (or the spec's evaluation.judge.model.base_url) is its URL"
            ) from None
        except httpx.HTTPError:
            return  # it answered, or broke off an answer: reachable; the judging calls say the rest

    def _run(self, items: list[_Item]) -> None:
        if not items:
            return
        from branchpoint.errors import ModelServerError
        from branchpoint.models.call import TransportError

        self._check_reachable()
        progress = None
        if self.progress:
            from rich.progress import Progress

            progress = Progress(transient=True)
            progress.start()
            task = progress.add_task(f"judge {self.name}", total=len(items))
        try:
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                futures = {pool.submit(self.ask, item.prompt, item.inputs): item for item in items}
                for future in as_completed(futures):
                    item = futures[future]
                    try:
                        label, raw, reasoning, calls, tin, tout = future.result()
                    except TransportError as exc:  # the server went away mid-run: one line, not a traceback
                        for pending in futures:
                            pending.cancel()  # those not started yet
                        raise ModelServerError(
                            f"LLM judge: {exc}; judgments made so far are cached: run the command again to go on"
                        ) from None
                    item.result = (label, raw, reasoning)
                    self.stats.calls += calls
                    self.stats.input_tokens += tin
                    self.stats.output_tokens += tout
                    if label != UNPARSEABLE:  # cached as we go: an interrupted run resumes
                        self.cache.put(item.key, item.prompt.version, self.model, label, raw, reasoning)
                    if progress is not None:
                        progress.update(task, advance=1)
        finally:
            if progress is not None:
                progress.stop()

    # -- the judge protocol -----------------------------------------------------------------

    def judge_many(self, records: Sequence[ExecutionRecord]) -> list[list[Judgment]]:
        """Judgments for every record; model calls only for items the cache does not hold."""
        items: dict[str, _Item] = {}
        plans = [self._plan(r, items) for r in records]
        missing = []
        for item in items.values():
            item.result = self.cache.get_entry(item.key)
            if item.result is None:
                missing.append(item)
        self.stats.items += len(items)
        self.stats.cached += len(items) - len(missing)
        self._run(missing)
        out = []
        for plan in plans:
            judgments = []
            for slot in plan:
                raw: str | None
                reasoning: str | None = None
                if slot.fixed is not None:
                    (label, raw), version = slot.fixed, None
                else:
                    assert slot.key is not None  # a slot not fixed by the trace has an item
                    item = items[slot.key]
                    assert item.result is not None
                    (label, raw, reasoning), version = item.result, item.prompt.version
                    self.stats.unparseable += label == UNPARSEABLE
                extra: dict[str, Any] = {"model": self.model, "prompt_version": version}
                if slot.doc_id is not None:
                    extra["doc_id"] = slot.doc_id
                if reasoning:
                    extra["reasoning"] = reasoning
                judgments.append(Judgment(judge=self.name, kind=slot.kind, label=label, raw=raw, **extra))
            out.append(judgments)
        return out

    def __call__(self, record: ExecutionRecord) -> list[Judgment]:
        return self.judge_many([record])[0]


class JudgeModelSpec(BaseModel):
    """The chat model an LLM judge asks: an OpenAI-compatible server (chat endpoint, temperature 0,
    seed 0). The API key, if any, is read from the environment variable `api_key_env`, never
    written into a spec or passed on the command line."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Model name sent to the server, e.g. Qwen/Qwen3-8B.")
    base_url: str = Field(min_length=1, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key.")
    timeout_s: float = Field(120.0, gt=0)
    response_cache: str | None = Field(
        None,
        description="A folder whose responses.sqlite answers every judge request sent before (shared across "
        "runs; `evaluate --cache DIR` sets it). Default: off.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, base_url: str) -> str:
        from branchpoint.models.spec import checked_base_url

        return checked_base_url(base_url)


class LLMJudgeSettings(BaseModel):
    """Settings of the `llm` judge: answer, abstention and (unless `evidence: false`) evidence."""

    model_config = ConfigDict(extra="forbid")

    model: JudgeModelSpec
    retries: int = Field(1, ge=0, description="Retries of an unparseable reply.")
    concurrency: int = Field(4, ge=1, description="Requests at once.")
    evidence: bool = Field(True, description="Also label every retrieved document.")
    max_tokens: int = Field(512, ge=1)


class LLMAnswerJudgeSettings(LLMJudgeSettings):
    """Settings of the `llm-answer` judge: answer and abstention only, unless `evidence: true`."""

    evidence: bool = Field(False, description="Also label every retrieved document.")


@judge("llm", settings=LLMJudgeSettings)
def llm_judge(settings: LLMJudgeSettings, run: JudgeRun) -> LLMJudge:
    """An `LLMJudge` named `llm:MODEL` on the OpenAI-compatible server `settings.model` names,
    caching its judgments in `run.cache_path` (None: in memory only)."""
    return build_llm_judge(settings, run, name=f"llm:{settings.model.name}")


@judge("llm-answer", settings=LLMAnswerJudgeSettings)
def llm_answer_judge(settings: LLMAnswerJudgeSettings, run: JudgeRun) -> LLMJudge:
    """The `llm` judge without evidence labels by default, named `llm-answer:MODEL`: one answer
    (answerable) or abstention (unanswerable) judgment per execution."""
    return build_llm_judge(settings, run, name=f"llm-answer:{settings.model.name}")


def build_llm_judge(
    settings: LLMJudgeSettings, run: JudgeRun, *, name: str, prompts: dict[str, JudgePrompt] | None = None
) -> LLMJudge:
    """An `LLMJudge` called `name` with `settings` (chat endpoint, temperature 0, seed 0): what a
    judge factory over a model spec returns; a new LLM judge passes its own `prompts` (by key:
    answer, abstention, evidence, evidence_answerable; the others stay the defaults)."""
    from branchpoint.models.openai_compat import OpenAICompatibleClient
    from branchpoint.models.spec import ModelSpec

    m = settings.model
    spec = ModelSpec(
        provider="openai",
        name=m.name,
        base_url=m.base_url,
        api_key_env=m.api_key_env,
        style="chat",
        temperature=0.0,
        seed=0,
        max_tokens=settings.max_tokens,
        timeout_s=m.timeout_s,
        response_cache=run.response_cache or m.response_cache,
    )
    cache = JudgeCache(str(run.cache_path)) if run.cache_path is not None else None
    return LLMJudge(
        OpenAICompatibleClient(spec),
        cache=cache,
        retries=settings.retries,
        concurrency=settings.concurrency,
        evidence=settings.evidence,
        max_tokens=settings.max_tokens,
        prompts=prompts,
        progress=run.progress,
        name=name,
    )
