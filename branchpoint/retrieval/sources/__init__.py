"""Retrieval source kinds: one pydantic class per kind, registered by name, each opening itself.

`dense` (the default), `bm25` and `searchr1` are built in, and the retrieval interventions
`empty`, `random`, `noisy`, `shuffled`, `oracle` and `withheld` over any of them
(`sources.interventions`); a plug-in (or a spec naming `package.module:Class`) adds another
with one module: a `SourceSpec` subclass with
`kind: Literal["name"]`, its fields and `open`, decorated with `@source("name")`. A spec's
`retrieval.sources` values are `SourceField`s: validated by the class of their `kind`.
"""

from branchpoint.retrieval.sources.base import (
    DEFAULT_KIND,
    SourceField,
    SourceSpec,
    source,
    source_class,
)
from branchpoint.retrieval.sources.bm25 import BM25SourceSpec
from branchpoint.retrieval.sources.corpus import CorpusSourceSpec
from branchpoint.retrieval.sources.dense import DenseSourceSpec
from branchpoint.retrieval.sources.interventions import (
    EmptySourceSpec,
    InterventionSourceSpec,
    NoisySourceSpec,
    OracleSourceSpec,
    RandomSourceSpec,
    ShuffledSourceSpec,
    WithheldSourceSpec,
)
from branchpoint.retrieval.sources.searchr1 import SearchR1SourceSpec

__all__ = [
    "DEFAULT_KIND",
    "BM25SourceSpec",
    "CorpusSourceSpec",
    "DenseSourceSpec",
    "EmptySourceSpec",
    "InterventionSourceSpec",
    "NoisySourceSpec",
    "OracleSourceSpec",
    "RandomSourceSpec",
    "SearchR1SourceSpec",
    "ShuffledSourceSpec",
    "SourceField",
    "SourceSpec",
    "WithheldSourceSpec",
    "source",
    "source_class",
]
