"""Source kinds `empty`, `random`, `noisy`, `shuffled`, `oracle`, `withheld`: retrieval interventions
(`branchpoint.retrieval.interventions` says what each does to a result list).

Each wraps a base source: `base: NAME`, another source of the same spec's `retrieval.sources`
(not itself an intervention), or, without `base`, a dense source over `corpus` (default the
demo corpus). Random passages and gold passages come from `corpus` when it is set, else from
the base's own corpus (a dense or bm25 base; a `searchr1` base needs `corpus`). `noisy` takes
`p`, the share of each list replaced. They are swept like any source, e.g.
`sweep: {retrieval.default: [clean, empty, random, noisy, shuffled, oracle, withheld]}`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from branchpoint.errors import InputError
from branchpoint.retrieval.sources.base import SourceSpec, source
from branchpoint.spec_paths import SpecPath

if TYPE_CHECKING:
    from branchpoint.retrieval.interventions import InterventionSource
    from branchpoint.retrieval.source import RetrievalSource


class InterventionSourceSpec(SourceSpec):
    """What every intervention kind shares: its base source and the corpus it draws from."""

    base: str | None = Field(None, description="Another source of retrieval.sources to intervene on.")
    corpus: SpecPath | None = Field(None, description="Where random and gold passages come from (default: the base's).")
    format: str = "auto"

    #: Whether the kind reads the base's result list.
    needs_base: ClassVar[bool] = False
    #: Whether the kind reads corpus passages.
    needs_corpus: ClassVar[bool] = False

    def corpus_path(self) -> Path | None:
        """The corpus file set here (`demo`: the embedded demo corpus); None when not set."""
        if self.corpus is None:
            return None
        if self.corpus == "demo":
            from branchpoint.demo_data import demo_corpus_path

            return demo_corpus_path()
        return Path(self.corpus)

    def default_base(self) -> SourceSpec:
        """The base without `base`: a dense source over `corpus` (default the demo corpus)."""
        from branchpoint.retrieval.sources.dense import DenseSourceSpec

        return DenseSourceSpec(corpus=self.corpus or "demo", format=self.format)

    def check(self, name: str) -> None:
        """Refuse a corpus file that is not there (the base is checked in `check_base`)."""
        corpus = self.corpus_path()
        if corpus is not None and not corpus.is_file():
            raise InputError(f"retrieval.sources.{name}.corpus: file not found: {self.corpus}")

    def check_base(self, name: str, sources: dict[str, SourceSpec]) -> None:
        """Refuse a `base` that names no source of the spec, or another intervention."""
        if self.base is None:
            return
        if self.base not in sources:
            raise InputError(
                f"retrieval.sources.{name}.base: unknown source {self.base!r} (known: {', '.join(sorted(sources))})"
            )
        if isinstance(sources[self.base], InterventionSourceSpec):
            raise InputError(
                f"retrieval.sources.{name}.base: {self.base!r} is itself an intervention (kind "
                f"{sources[self.base].kind}); name a dense, bm25 or searchr1 source"
            )

    def open(self, name: str, *, progress: bool = False) -> RetrievalSource:
        """The intervention over its default base (a source with `base: NAME` is opened by the
        run's source pool, which holds the named base: `open_over`)."""
        if self.base is not None:
            raise InputError(f"retrieval.sources.{name}: opened without its base {self.base!r} (open it through a run)")
        base = self.default_base().open(f"{name}.base", progress=progress) if self.needs_base else None
        return self.open_over(name, base)

    def open_over(self, name: str, base: RetrievalSource | None, base_params: str = "") -> InterventionSource:
        """The intervention over an opened base source (None for kinds that read no base)."""
        from branchpoint.retrieval.interventions import InterventionSource

        passages = self._passages(name, base) if self.needs_corpus else None
        corpus_params = ""
        if passages is not None:
            from branchpoint.retrieval.corpus_store import fingerprint_of

            corpus_params = fingerprint_of(passages)
        return InterventionSource(
            name=name,
            kind=self.kind,
            base=base if self.needs_base else None,
            passages=passages,
            p=float(getattr(self, "p", 0.0)),
            base_params=base_params if self.needs_base else "",
            corpus_params=corpus_params,
        )

    def _passages(self, name: str, base: RetrievalSource | None) -> Any:
        from branchpoint.retrieval.corpus_store import open_corpus

        corpus = self.corpus_path()
        if corpus is not None:
            return open_corpus(corpus, self.format)
        inner = getattr(base, "inner", base)  # a CachedSource's own source
        passages = getattr(getattr(inner, "index", None), "passages", None)
        if passages is not None:
            return passages
        if base is None:
            from branchpoint.demo_data import demo_corpus_path

            return open_corpus(demo_corpus_path(), "auto")
        raise InputError(
            f"retrieval.sources.{name}.corpus: kind {self.kind} draws passages from a corpus, and its base "
            f"{self.base!r} has none it can read (set corpus)"
        )


@source("empty")
class EmptySourceSpec(InterventionSourceSpec):
    """Every search returns no passages (the call is still made and counted)."""

    kind: Literal["empty"] = "empty"


@source("random")
class RandomSourceSpec(InterventionSourceSpec):
    """k passages drawn uniformly from the corpus, whatever the query."""

    kind: Literal["random"] = "random"
    needs_corpus: ClassVar[bool] = True


@source("noisy")
class NoisySourceSpec(InterventionSourceSpec):
    """The base's list with a share `p` of its positions replaced by random corpus passages."""

    kind: Literal["noisy"] = "noisy"
    p: float = Field(ge=0, le=1, description="Share of each result list replaced by random passages.")
    needs_base: ClassVar[bool] = True
    needs_corpus: ClassVar[bool] = True


@source("shuffled")
class ShuffledSourceSpec(InterventionSourceSpec):
    """The base's list with its ranks permuted."""

    kind: Literal["shuffled"] = "shuffled"
    needs_base: ClassVar[bool] = True


@source("oracle")
class OracleSourceSpec(InterventionSourceSpec):
    """The question's gold passages first (its supporting passage ids, else the passages that
    hold a gold answer), then the base's list; refused for an answerable question with neither."""

    kind: Literal["oracle"] = "oracle"
    needs_base: ClassVar[bool] = True
    needs_corpus: ClassVar[bool] = True


@source("withheld")
class WithheldSourceSpec(InterventionSourceSpec):
    """The base's list without the question's gold passages (its supporting passage ids and the
    passages holding a gold answer), refilled from further down the base's ranking: answerable
    questions become unanswerable given the corpus. Unanswerable questions get the base's list."""

    kind: Literal["withheld"] = "withheld"
    needs_base: ClassVar[bool] = True
