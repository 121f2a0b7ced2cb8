"""What a component of each registry kind must be, checked when it is registered.

Each kind of `branchpoint.registry` has a `KindContract`: a sentence saying what a component of
the kind is, a check of the object against what branchpoint's own code calls on it (a decide
node's `(state, runtime)` arguments, a source kind's pydantic class with `open`, an index kind's
defaults and faiss constructor, ...), and the metadata fields it may be registered with. The
registry applies the contract in `add` (and to a `package.module:attr` it resolves), so a
plug-in that does not fit is refused when it registers, with an error naming the plug-in, its
kind and what is missing, not later in the middle of a run.

`Kind[T]` is a typed handle on a kind: `REGISTRY.get(Kind[RewardFn]("reward"), name).obj` is a
`RewardFn` to the type checker. Each kind's own module declares its handle beside the type it
hands out (`policies.POLICY`, `judges.JUDGE`, ...), so this module needs none of them: like the
registry, it imports nothing of branchpoint's beyond `errors`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

T = TypeVar("T")

#: A check of a component: what is wrong with it (None: nothing); gets the object and its metadata.
Check = Callable[[Any, Mapping[str, Any]], "str | None"]


@dataclass(frozen=True)
class Kind(Generic[T]):
    """A typed handle on a registry kind: `REGISTRY.get(handle, name)` is an `Entry[T]`."""

    name: str


@dataclass(frozen=True)
class KindContract:
    """A kind's rules: what a component of it is (`what`, for errors), the check of one, and
    the metadata fields it may carry, each with a check of its value (None: any value)."""

    kind: str
    what: str
    check: Check
    meta: Mapping[str, Callable[[Any], bool] | None] = field(default_factory=dict)

    def problem(self, obj: Any, meta: Mapping[str, Any]) -> str | None:
        """What is wrong with registering `obj` with `meta` under this kind (None: nothing)."""
        unknown = [key for key in meta if key not in self.meta]
        if unknown:
            known = ", ".join(self.meta) or "none"
            return f'unknown metadata field "{unknown[0]}" ({article(self.kind)} {self.kind} may carry: {known})'
        for key, valid in self.meta.items():
            if key in meta and valid is not None and not valid(meta[key]):
                return f'metadata field "{key}" has the wrong type ({type(meta[key]).__name__})'
        return self.check(obj, meta)


def article(word: str) -> str:
    """ "an" before a vowel, else "a" (for "an index", "a policy")."""
    return "an" if word[:1] in "aeiou" else "a"


# --- checks -------------------------------------------------------------------------------------


def _describe(obj: Any) -> str:
    return f"a {type(obj).__name__}"


def _binds(fn: Any, *args: str, **kwargs: Any) -> bool | None:
    """Whether `fn` can be called with these positional argument names (and keywords); None when
    its signature cannot be read (a builtin)."""
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return False
    except ValueError:
        return None
    return True


def _callable_taking(*forms: tuple[str, ...]) -> Check:
    """A check that the object is callable with one of `forms` (positional argument names)."""

    def check(obj: Any, meta: Mapping[str, Any]) -> str | None:
        if not callable(obj):
            return f"{_describe(obj)} is not callable"
        if any(_binds(obj, *form) is not False for form in forms):
            return None
        shown = " or ".join(f"({', '.join(form)})" for form in forms)
        return f"it does not take the arguments {shown}"

    return check


def _settings_model(value: Any) -> bool:
    return value is None or (isinstance(value, type) and issubclass(value, BaseModel))


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _policy(obj: Any, meta: Mapping[str, Any]) -> str | None:
    target = obj if inspect.isfunction(obj) or inspect.ismethod(obj) else getattr(obj, "__call__", None)  # noqa: B004
    if not (inspect.isfunction(target) or inspect.ismethod(target) or isinstance(obj, functools.partial)):
        return f"{_describe(obj)}, not a Python function of (state, runtime) returning a state update"
    if _binds(obj, "state", "runtime") is None:
        return "its arguments cannot be read"
    if not (_binds(obj, "state", "runtime") or _binds(obj, "state")):
        return "it does not take (state) or (state, runtime) arguments"
    return None


def _judge(obj: Any, meta: Mapping[str, Any]) -> str | None:
    if meta.get("settings") is not None:  # a factory: fn(settings, run) -> BatchJudge
        return _callable_taking(("settings", "run"))(obj, meta)
    return _callable_taking(("record",))(obj, meta)


def _source(obj: Any, meta: Mapping[str, Any]) -> str | None:
    if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
        return f"{_describe(obj)}, not a pydantic class (a source kind derives from SourceSpec)"
    if "kind" not in obj.model_fields:
        return "it has no `kind` field (a source kind derives from SourceSpec)"
    missing = [m for m in ("open", "check", "check_data") if not callable(getattr(obj, m, None))]
    if missing:
        return f"it has no {', '.join(missing)} method (a source kind derives from SourceSpec)"
    if getattr(getattr(obj, "open"), "__isabstractmethod__", False):  # noqa: B009
        return "its `open` is abstract (a source kind defines open(name, progress=False))"
    return None


def _encoder(obj: Any, meta: Mapping[str, Any]) -> str | None:
    if not callable(obj):
        return f"{_describe(obj)} is not callable"
    if _binds(obj, settings=None) is False:
        return "it cannot be built as obj(settings=EncoderSettings)"
    if isinstance(obj, type) and not callable(getattr(obj, "encode", None)):
        return "its instances have no encode(texts, batch_size) method"
    return None


@runtime_checkable
class IndexKindLike(Protocol):
    """An index kind: its parameters' defaults, those that only change searching, and the faiss
    index it makes (`new_index(dim, params)`; None for an index that is not a faiss one)."""

    name: str
    defaults: Mapping[str, int | float | str]
    search_params: tuple[str, ...]
    new_index: Callable[[int, Mapping[str, Any]], Any] | None


def _index(obj: Any, meta: Mapping[str, Any]) -> str | None:
    if not isinstance(obj, IndexKindLike):
        missing = [a for a in ("name", "defaults", "search_params", "new_index") if not hasattr(obj, a)]
        return f"{_describe(obj)}, not an IndexKind (missing: {', '.join(missing)})"
    unknown = [p for p in obj.search_params if p not in obj.defaults]
    if unknown:
        return f'search parameter "{unknown[0]}" has no default in `defaults`'
    return None


@runtime_checkable
class QuestionFormatLike(Protocol):
    """A question format: its name, its loader and how `fmt="auto"` recognises its files."""

    name: str
    parse: Callable[..., Any]
    by_name: Callable[..., bool] | None
    sniff: Callable[..., bool] | None
    name_rank: int
    sniff_rank: int
    splits: tuple[str, ...]
    label: str


def _question_format(obj: Any, meta: Mapping[str, Any]) -> str | None:
    if not isinstance(obj, QuestionFormatLike):
        names = ("name", "parse", "by_name", "sniff", "name_rank", "sniff_rank", "splits", "label")
        missing = [a for a in names if not hasattr(obj, a)]
        return f"expected a QuestionFormat, got {type(obj).__name__} (missing: {', '.join(missing)})"
    if not callable(obj.parse):
        return "its `parse` is not callable"
    return None


def _calibrator(obj: Any, meta: Mapping[str, Any]) -> str | None:
    kwargs = {"seed": 0, **({"settings": None} if meta.get("settings") is not None else {})}
    if not callable(obj):
        return f"{_describe(obj)} is not callable"
    if _binds(obj, "raw", "states", "dev", **kwargs) is False:
        shown = ", ".join(["raw", "states", "dev", *(f"{k}=" for k in kwargs)])
        return f"it does not take the arguments ({shown})"
    return None


def _forecaster(obj: Any, meta: Mapping[str, Any]) -> str | None:
    form = ("states", "dev", "settings") if meta.get("settings") is not None else ("states", "dev")
    return _callable_taking(form)(obj, meta)


CONTRACTS: Mapping[str, KindContract] = {
    c.kind: c
    for c in (
        KindContract(
            "policy",
            "a decide node: def decide(state, runtime) -> dict (async or plain)",
            _policy,
            {"force_answer": lambda v: v is None or callable(v)},
        ),
        KindContract(
            "judge",
            "a function record -> list[Judgment], or with settings=Model a factory fn(settings, run) -> BatchJudge",
            _judge,
            {"settings": _settings_model},
        ),
        KindContract("source", "a SourceSpec subclass (pydantic settings with kind, open, check)", _source),
        KindContract("encoder", "a class built as cls(settings=EncoderSettings) with encode(texts)", _encoder),
        KindContract("index", "an IndexKind (defaults, search_params, new_index)", _index),
        KindContract("question_format", "a QuestionFormat", _question_format),
        KindContract(
            "provider",
            "a context manager function provider(spec, log_dir) yielding a ModelClient",
            _callable_taking(("spec", "log_dir")),
            # a run's hook on its planned (ModelSpec, Question) pairs before it writes anything
            {"check_questions": callable},
        ),
        KindContract(
            "reward",
            "a function reward(records, judge) -> array of floats in [0, 1]",
            _callable_taking(("records", "judge")),
        ),
        KindContract(
            "forecaster",
            "a function fn(states, dev) -> Forecast | (q_T, q_S) (with settings=Model: fn(states, dev, settings))",
            _forecaster,
            {"fitted": _is_bool, "calibrate": _is_bool, "settings": _settings_model},
        ),
        KindContract(
            "calibrator",
            "a function fn(raw, states, dev, seed=0) -> Forecast (with settings=Model: also settings=)",
            _calibrator,
            {"settings": _settings_model},
        ),
        KindContract(
            "router",
            "a function fn(states, dev, price) -> P(SEARCH) per state",
            _callable_taking(("states", "dev", "price")),
        ),
    )
}
