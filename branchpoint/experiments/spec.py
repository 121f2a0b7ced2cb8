"""The YAML experiment spec, validated into pydantic, and its expansion into conditions.

A spec names the questions, the model, the agent, the retrieval sources and the evaluation, and
`sweep` lists axes (dotted paths into the spec, e.g. `agent.search_cap: [0, 1, 3]`) whose
cartesian product gives the conditions. An axis over a section takes mappings that override
several of its settings at once (e.g. `model: [{name: a, base_url: …}, {name: b, …}]`). Unknown keys and wrong types are errors naming the field.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_serializer, model_validator
from pydantic_core import PydanticCustomError

from branchpoint.checkpoints.plan import ForkPlan
from branchpoint.errors import InputError
from branchpoint.models.spec import ModelSpec
from branchpoint.retrieval.encoder_settings import EncoderSettings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SampleSpec(_Strict):
    """A balanced, seeded sample of the question set."""

    answerable: int = Field(ge=0)
    unanswerable: int = Field(0, ge=0)


class QuestionsSpec(_Strict):
    """Where the questions come from: `demo` (embedded) or a file in one of the known formats."""

    path: str = "demo"
    format: str = "auto"
    limit: int | None = Field(None, ge=1)
    categories: list[str] | None = None
    sample: SampleSpec | None = None
    split: str | None = Field(None, description="FreshQA files: keep one split (TEST or DEV).")


#: SourceSpec fields added after the first release, left out of its dump while at their defaults
#: so that existing specs keep their condition fingerprints (and so their execution ids).
_SOURCE_FIELDS_DUMPED_IF_SET: dict[str, Any] = {
    "kind": "dense", "index_kind": None, "index": None, "index_params": {}, "url": None,
    "device": "cpu", "retrieval_method": None, "encoder_settings": None,
}


class SourceSpec(_Strict):
    """A named retrieval source.

    - `kind: dense` (default): `corpus` (`demo` or a file) encoded with `encoder` into a FAISS
      index of `index_kind` flat (exact, default), hnsw or ivf, built once and cached; or
      `index`: a directory `branchpoint index build` wrote (then `corpus` is optional and, if
      given, must be the corpus it was built from), or a FlashRAG faiss index file with its
      `corpus` jsonl. `device: gpu` puts the faiss index on the GPU (faiss-gpu needed).
    - `kind: bm25`: BM25 over `corpus` (bm25s), or a saved bm25 `index` directory.
    - `kind: searchr1`: a Search-R1-compatible retrieval server at `url`.
    `index_params`: M, efConstruction, efSearch (hnsw); nlist, nprobe (ivf); k1, b (bm25).
    Encoding (kind dense): `retrieval_method` (FlashRAG's names: e5, bge, contriever, jina, dpr)
    sets prefixes, pooling and normalisation as FlashRAG does; `encoder_settings`
    ({query_prefix, passage_prefix, pooling: mean|cls, normalize}) sets them one by one (wins).
    """

    kind: Literal["dense", "bm25", "searchr1"] = "dense"
    corpus: str = "demo"
    format: str = "auto"
    encoder: str = "minilm-onnx"
    chunk_words: int | None = Field(None, ge=10)
    index_kind: Literal["flat", "hnsw", "ivf"] | None = None
    index: str | None = None
    index_params: dict[str, int | float | str] = Field(default_factory=dict)
    url: str | None = None
    device: Literal["cpu", "gpu"] = "cpu"
    retrieval_method: str | None = None
    encoder_settings: EncoderSettings | None = None

    @property
    def encoder_name(self) -> str:
        """The encoder's full name, its settings included (what index manifests record)."""
        from branchpoint.retrieval.encoder import resolve_encoder_name

        return resolve_encoder_name(self.encoder, self.retrieval_method, self.encoder_settings)

    @model_validator(mode="after")
    def _check_combination(self) -> SourceSpec:
        """Refuse settings the source kind does not use, naming the field."""
        def refuse(message: str) -> None:
            raise PydanticCustomError("source_settings", message)

        if self.kind == "searchr1":
            if not self.url:
                refuse('"url" is required for kind searchr1 (the server, e.g. http://127.0.0.1:8000)')
            unused = [name for name, default in (
                ("corpus", "demo"), ("format", "auto"), ("encoder", "minilm-onnx"),
                ("chunk_words", None), ("index_kind", None), ("index", None), ("index_params", {}),
                ("device", "cpu"), ("retrieval_method", None), ("encoder_settings", None))
                if getattr(self, name) != default]
            if unused:
                refuse(f'"{unused[0]}" is not used by kind searchr1 (the server holds the corpus and index)')
            return self
        if self.url is not None:
            refuse(f'"url" is only for kind searchr1 (this source is kind {self.kind})')
        if self.kind == "bm25":
            if self.index_kind is not None:
                refuse('"index_kind" is only for kind dense (flat, hnsw, ivf)')
            if self.encoder != "minilm-onnx" or self.retrieval_method or self.encoder_settings:
                refuse('"encoder" is not used by kind bm25 (it scores words, not vectors)')
            if self.device == "gpu":
                refuse('"device: gpu" is only for kind dense (bm25 runs on the CPU)')
        if self.kind == "dense" and (self.retrieval_method or self.encoder_settings):
            try:
                self.encoder_name  # noqa: B018 - checks the method name and settings
            except InputError as exc:
                refuse(str(exc))
        if self.device == "gpu" and self.index_kind == "hnsw":
            refuse('"device: gpu" cannot serve index_kind hnsw (faiss has no GPU HNSW); use flat or ivf')
        params_kind = "bm25" if self.kind == "bm25" else (
            self.index_kind or (None if self.index else "flat"))
        if self.index_params and params_kind is not None:
            from branchpoint.retrieval.index_kinds import resolve_params

            try:
                resolve_params(params_kind, self.index_params)
            except InputError as exc:
                hint = " (set index_kind)" if params_kind == "flat" and not self.index_kind else ""
                refuse(f'"index_params": {exc}{hint}')
        return self

    @model_serializer(mode="wrap")
    def _dump_new_fields_if_set(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name, default in _SOURCE_FIELDS_DUMPED_IF_SET.items():
                if name in data and data[name] == default:
                    del data[name]
        return data


class RetrievalSpec(_Strict):
    """Named sources; `default` is the one the agent searches unless a fork switches it."""

    default: str = "demo"
    sources: dict[str, SourceSpec] = Field(default_factory=lambda: {"demo": SourceSpec()})


#: The largest `agent.search_cap`: beyond it an execution's checkpoints and graph recursion limit
#: grow without bound, and no study needs more than a few dozen searches.
MAX_SEARCH_CAP = 1000


class AgentSpec(_Strict):
    """The agent: its policy (registered name or `module:function`), search offer and limits."""

    policy: str = "constrained"
    search: bool = Field(True, description="Offer the search tool (false: the no-search base condition).")
    search_cap: int = Field(
        10, ge=0, le=MAX_SEARCH_CAP,
        description="Most searches per execution; then a forced answer (at most 1,000: each search is "
        "several saved states, and the graph's step limit grows with the cap).",
    )
    top_k: int = Field(3, ge=1)
    evidence_words: int = Field(60, ge=5, description="Words of each passage shown to the model.")
    answer_max_tokens: int | None = Field(None, ge=1, description="Default: model.max_tokens.")
    malformed_retries: int = Field(1, ge=0)
    prompt: Literal["plain", "abstention", "fewshot", "self_eval"] = Field(
        "abstention", description="Prompt variant of the chat policies (the mitigation study)."
    )


class MultiTurnSpec(_Strict):
    """Earlier turns before each evaluated question: how many, and of which kind.

    The earlier questions are drawn (seeded) from the whole question file (not the selection); their answers are the
    gold answer (answerable) or an abstention (unanswerable): an oracle conversation history.
    """

    preceding: int = Field(0, ge=0, le=50)
    context: Literal["answerable", "mixed", "unanswerable"] = "mixed"


class EvaluationSpec(_Strict):
    """How `branchpoint evaluate` scores the run by default."""

    judge: str = "rule"
    lam: float = Field(0.25, ge=0)
    mu: float = Field(500, ge=0)


class ExperimentSpec(_Strict):
    """A whole experiment: what to run on which questions, and the sweep axes."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    seed: int = 0
    questions: QuestionsSpec = Field(default_factory=QuestionsSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    agent: AgentSpec = Field(default_factory=AgentSpec)
    retrieval: RetrievalSpec = Field(default_factory=RetrievalSpec)
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)
    multi_turn: MultiTurnSpec | None = None
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    fork: ForkPlan | None = Field(None, description="A fork study `branchpoint run` does after the run.")

    _source_dir: Path | None = PrivateAttr(None)

    @property
    def source_dir(self) -> Path | None:
        """The folder of the spec file this spec was loaded from (None when built in code):
        `module:function` policies are imported from there too."""
        return self._source_dir


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that holds the last part of `loc` (a validation error's location)."""
    cls: Any = ExperimentSpec
    expect_key = False  # the previous part was a dict field: this part is a free key
    for part in loc[:-1]:
        if expect_key:
            expect_key = False
            continue
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or part not in cls.model_fields:
            return None
        annotation: Any = cls.model_fields[part].annotation
        while True:  # unwrap Optional / unions to the model or dict inside
            origin = typing.get_origin(annotation)
            if origin in (typing.Union, types.UnionType):
                annotation = next((a for a in typing.get_args(annotation) if a is not type(None)), None)
            elif origin is dict:
                annotation = typing.get_args(annotation)[1]
                expect_key = True
                break
            else:
                break
        cls = annotation
    return cls if isinstance(cls, type) and issubclass(cls, BaseModel) else None


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    """` (did you mean "x"?)` for the closest choice (difflib), or "" when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def describe_spec_error(exc: ValidationError) -> str:
    """Like `describe_validation_error`, with a did-you-mean for each unknown key."""
    parts = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        text = f'field "{".".join(str(p) for p in loc) or "(spec)"}": {err["msg"]}'
        if err.get("type") == "extra_forbidden" and loc:
            cls = _model_at(loc)
            if cls is not None:
                text += did_you_mean(str(loc[-1]), cls.model_fields)
        parts.append(text)
    return "; ".join(parts)


def _parse_value(raw: str, where: str) -> Any:
    try:
        return yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise InputError(f"{where}: the value is not valid YAML ({getattr(exc, 'problem', exc)})") from None


def apply_overrides(data: dict[str, Any], overrides: typing.Sequence[str], source: str = "--set") -> dict[str, Any]:
    """A copy of raw spec data with `KEY=VALUE` overrides applied (values read as YAML).

    `KEY` is a dotted path into the spec (`agent.search_cap=3`, `questions.sample={answerable: 4}`;
    a mapping merges into a section), or `sweep.AXIS` for a sweep axis
    (`sweep.agent.search_cap=[0, 1, 2]`; `sweep.AXIS=null` removes the axis). Setting a swept
    setting directly is refused: the sweep would override it.
    """
    out = json.loads(json.dumps(data, default=str))
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        where = f"{source} {item!r}"
        if not sep or not key or any(not part for part in key.split(".")):
            raise InputError(f"{where}: expected KEY=VALUE with a dotted KEY, e.g. --set agent.search_cap=3")
        value = _parse_value(raw, where)
        if key.startswith("sweep."):
            axis = key.removeprefix("sweep.")
            sweep = out.setdefault("sweep", {}) or {}
            out["sweep"] = sweep
            if value is None:
                sweep.pop(axis, None)
                continue
            if not isinstance(value, list) or not value:
                raise InputError(f"{where}: a sweep axis takes a non-empty list, e.g. --set {key}=[1, 2]")
            sweep[axis] = value
            continue
        if key in (out.get("sweep") or {}):
            raise InputError(f"{where}: {key} is a sweep axis of this spec (the sweep would override it); "
                             f"set the axis instead, e.g. --set sweep.{key}=[{raw.strip()}]")
        parts = key.split(".")
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise InputError(f"{where}: {'.'.join(parts[: i + 1])} is a setting, not a section")
            node = child
        last = parts[-1]
        if isinstance(value, dict) and isinstance(node.get(last), dict):
            node[last] = {**node[last], **value}
        else:
            node[last] = value
    return out


def load_spec(
    path: str | Path, overrides: typing.Sequence[str] = (), *, check_policy: bool = True
) -> ExperimentSpec:
    """Read and validate a YAML spec (safe loading); errors name the file and the field or line.

    `overrides` are `KEY=VALUE` settings applied before validation (see `apply_overrides`), so
    the spec returned, and stored with a run, is the resolved one. With `check_policy`, every
    condition's agent policy must resolve (registered, or an importable `module:function`
    beside the spec or in the working directory); a run folder's recorded `spec.yaml` is read
    without it (its policy module lives beside the original spec).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: spec file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise InputError(f"{path}{where}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of spec fields at the top level")
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{path}: {describe_spec_error(exc)}") from None
    conditions = expand_conditions(spec, source=str(path))  # check the sweep axes now, before any work
    for condition, resolved in conditions:
        check_model_identity(resolved, str(path), condition)
    check_judges(spec, source=str(path))
    spec._source_dir = path.resolve().parent
    if check_policy:
        check_policies([resolved for _, resolved in conditions], source=str(path), search_paths=[spec._source_dir])
    return spec


def check_policies(specs: list[ExperimentSpec], source: str = "spec", search_paths: list[Path] | None = None) -> None:
    """Refuse an agent policy that is neither registered nor an importable `module:function`
    (looked for in `search_paths` and the working directory), naming the spec file."""
    from branchpoint.agents import resolve_policy

    for policy in dict.fromkeys(s.agent.policy for s in specs):
        try:
            resolve_policy(policy, search_paths or [])
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None


#: The name of the model the embedded server loads when `model.server.gguf` is not set.
PACKAGED_MODEL_NAME = "gemma-3-270m"


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def check_model_identity(spec: ExperimentSpec, source: str = "spec", condition: dict[str, Any] | None = None) -> None:
    """Refuse a spec whose `model.name` is not the model the embedded server would load.

    The embedded provider serves one GGUF under whatever name the spec gives, so a name that
    disagrees with it records one model's outputs under another's name. With the packaged GGUF
    the name must be `gemma-3-270m`; with `model.server.gguf` the name must appear in the file's
    name (ignoring case and punctuation).
    """
    model = spec.model
    if model.provider != "embedded":
        return
    where = f" (sweep condition {condition})" if condition else ""
    if model.server.gguf is None:
        if model.name != PACKAGED_MODEL_NAME:
            raise InputError(
                f'{source}: field "model.name"{where}: the embedded provider loads the packaged '
                f"{PACKAGED_MODEL_NAME}, not {model.name!r}; set model.name: {PACKAGED_MODEL_NAME}, or serve "
                f"{model.name} (e.g. with vLLM) and use provider: openai with its base_url"
            )
        return
    if _squash(model.name) not in _squash(Path(model.server.gguf).name):
        raise InputError(
            f'{source}: field "model.name"{where}: {model.name!r} does not name the GGUF the embedded server '
            f"loads ({Path(model.server.gguf).name}); set model.name to that model"
        )


def check_judges(spec: ExperimentSpec, source: str = "spec") -> None:
    """Refuse a judge name that no judge is registered under (`evaluation.judge`, `fork.judge`)."""
    from branchpoint.evaluation.judges import judge_names

    for field, name in (("evaluation.judge", spec.evaluation.judge), ("fork.judge", spec.fork and spec.fork.judge)):
        if name and name not in judge_names():
            raise InputError(f'{source}: field "{field}": unknown judge {name!r} (known: {", ".join(judge_names())})')


def _set_path(data: dict[str, Any], dotted: str, value: Any, source: str) -> None:
    keys = dotted.split(".")
    node: Any = data
    for key in keys[:-1]:
        if not isinstance(node, dict) or key not in node or not isinstance(node[key], dict):
            sections = [k for k, v in node.items() if isinstance(v, dict)] if isinstance(node, dict) else []
            raise InputError(
                f'{source}: field "sweep.{dotted}": {key!r} is not a section of the spec{did_you_mean(key, sections)}'
            )
        node = node[key]
    if not isinstance(node, dict) or keys[-1] not in node:
        hint = did_you_mean(keys[-1], node) if isinstance(node, dict) else ""
        raise InputError(f'{source}: field "sweep.{dotted}": no such setting {keys[-1]!r}{hint}')
    if isinstance(value, dict) and isinstance(node[keys[-1]], dict):
        # a mapping value overrides several settings of a section at once and keeps the rest,
        # e.g. `model: [{name: a, base_url: …}, {name: b, base_url: …}]`
        node[keys[-1]] = {**node[keys[-1]], **value}
    else:
        node[keys[-1]] = value


def expand_conditions(spec: ExperimentSpec, source: str = "spec") -> list[tuple[dict[str, Any], ExperimentSpec]]:
    """The cartesian product of the sweep axes: (condition dict, spec with those values set)."""
    if not spec.sweep:
        return [({}, spec)]
    axes = sorted(spec.sweep)
    for axis in axes:
        if axis.startswith("sweep") or not spec.sweep[axis]:
            raise InputError(f'{source}: field "sweep.{axis}": expected a non-empty list of values')
    base = spec.model_dump(exclude={"sweep", "fork"})
    out = []
    for values in itertools.product(*(spec.sweep[a] for a in axes)):
        data = json.loads(json.dumps(base))
        for axis, value in zip(axes, values):
            _set_path(data, axis, value, source)
        try:
            resolved = ExperimentSpec.model_validate(data)
        except ValidationError as exc:
            raise InputError(f"{source}: sweep value: {describe_spec_error(exc)}") from None
        out.append((dict(zip(axes, values)), resolved))
    return out


def condition_fingerprint(spec: ExperimentSpec) -> str:
    """A hash of every setting that can change an execution's outcome (not timeouts, URLs, ports)."""
    relevant = {
        "seed": spec.seed,
        "model": spec.model.model_dump(
            # where and how the model is reached does not change what it answers
            exclude={"base_url", "api_key_env", "timeout_s", "retries", "server", "max_connections",
                     # the simulator's settings matter only to it (and leave other ids unchanged)
                     *(() if spec.model.provider == "sim" else ("sim",))}
        ),
        "agent": spec.agent.model_dump(),
        "retrieval": spec.retrieval.model_dump(),
        "multi_turn": spec.multi_turn.model_dump() if spec.multi_turn else None,
    }
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


#: Settings that do not change what a run folder's executions are: where and how the model is
#: reached, how the run is scored, its description, a fork study's plan and `questions.limit`
#: (a prefix of the same selection, e.g. `run --limit`).
_NOT_OUTCOME = (
    "description", "evaluation", "fork", "sweep", "questions.limit",
    *(f"model.{name}" for name in ("base_url", "api_key_env", "timeout_s", "retries", "server", "max_connections")),
)  # fmt: skip


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def run_identity(spec: ExperimentSpec) -> dict[str, Any]:
    """The outcome-relevant settings of a spec as dotted fields: what a run folder belongs to.

    Everything that enters execution ids (see `condition_fingerprint`) plus the name, seed and
    question selection; the settings a sweep axis sets are left out (the axis names stand for
    them, under `sweep axes`), so adding values to an axis keeps the identity.
    """
    flat: dict[str, Any] = {}
    _flatten(spec.model_dump(mode="json"), "", flat)
    dropped = (*_NOT_OUTCOME, *spec.sweep)
    out = {k: v for k, v in flat.items() if not any(k == d or k.startswith(d + ".") for d in dropped)}
    out["sweep axes"] = sorted(spec.sweep)
    return out


def spec_fingerprint(spec: ExperimentSpec) -> str:
    """A short hash of `run_identity`: equal for specs that may share a run folder."""
    return hashlib.sha256(json.dumps(run_identity(spec), sort_keys=True, default=str).encode()).hexdigest()[:16]


def identity_differences(recorded: ExperimentSpec, new: ExperimentSpec) -> list[str]:
    """The dotted fields whose outcome-relevant values differ between two specs (sorted)."""
    a, b = run_identity(recorded), run_identity(new)
    return sorted(k for k in set(a) | set(b) if a.get(k, "<unset>") != b.get(k, "<unset>"))


def check_same_run(recorded: ExperimentSpec, new: ExperimentSpec, run_dir: str | Path) -> None:
    """Refuse to run `new` into a folder that holds the run of another spec, naming the fields.

    A run folder belongs to one spec (`spec_fingerprint`); the sweep's values may grow or shrink.
    """
    diff = identity_differences(recorded, new)
    if not diff:
        return
    a, b = run_identity(recorded), run_identity(new)
    shown = "; ".join(
        f"{k}: {json.dumps(a.get(k, '<unset>'), default=str)} there, {json.dumps(b.get(k, '<unset>'), default=str)} now"
        for k in diff[:5]
    )
    more = f" (and {len(diff) - 5} more)" if len(diff) > 5 else ""
    raise InputError(
        f"{run_dir} holds the run of another spec (fingerprint {spec_fingerprint(recorded)}, this one "
        f"{spec_fingerprint(new)}): {shown}{more}. Use a new --out folder for this spec; only sweep "
        "values may change within one run folder"
    )
