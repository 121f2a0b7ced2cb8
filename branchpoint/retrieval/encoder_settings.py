"""Encoder settings: query / passage prefixes, pooling and normalisation, FlashRAG's retrieval
methods, and the `NAME?key=value` form that carries settings inside an encoder name.

An encoder's recorded name includes its non-default settings (`encoder_name`), so an index built
with one prefix is never reused with another.
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode

from pydantic import BaseModel, ConfigDict, ValidationError

from branchpoint.errors import InputError

E5_QUERY_PREFIX = "query: "
E5_PASSAGE_PREFIX = "passage: "
#: BGE's English query instruction (passages get none).
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "

Pooling = Literal["mean", "cls"]


class EncoderSettings(BaseModel):
    """How an encoder turns text into vectors, where it differs from the model's defaults.

    None leaves a setting to the model (its prompts or E5 prefixes; its pooling; normalised).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    query_prefix: str | None = None
    passage_prefix: str | None = None
    pooling: Pooling | None = None
    normalize: bool | None = None

    def merged(self, other: EncoderSettings | None) -> EncoderSettings:
        """These settings with those `other` sets put over them."""
        if other is None:
            return self
        return self.model_copy(update=other.model_dump(exclude_none=True))

    def is_default(self) -> bool:
        """Whether nothing is set."""
        return not self.model_dump(exclude_none=True)


#: FlashRAG / Search-R1 `retrieval_method` names -> the settings those projects encode with.
FLASHRAG_METHODS: dict[str, EncoderSettings] = {
    "e5": EncoderSettings(
        query_prefix=E5_QUERY_PREFIX, passage_prefix=E5_PASSAGE_PREFIX, pooling="mean", normalize=True
    ),
    "bge": EncoderSettings(query_prefix=BGE_QUERY_INSTRUCTION, passage_prefix="", pooling="cls", normalize=True),
    "contriever": EncoderSettings(query_prefix="", passage_prefix="", pooling="mean", normalize=True),
    "jina": EncoderSettings(query_prefix="", passage_prefix="", pooling="mean", normalize=True),
    "dpr": EncoderSettings(query_prefix="", passage_prefix="", pooling="cls", normalize=False),
}


def retrieval_method_settings(method: str) -> EncoderSettings:
    """The settings of a FlashRAG `retrieval_method` name (`e5`, `bge`, ... or a name containing
    one, as FlashRAG matches them: `e5-base-v2`, `bge-large-en`)."""
    key = method.strip().lower()
    if key in FLASHRAG_METHODS:
        return FLASHRAG_METHODS[key]
    for name, settings in FLASHRAG_METHODS.items():
        if name in re.split(r"[^a-z0-9]+", key):
            return settings
    raise InputError(
        f"unknown retrieval_method {method!r} (FlashRAG names: "
        f"{', '.join(FLASHRAG_METHODS)}; bm25 is a source kind, not an encoder)"
    )


def split_encoder_name(name: str) -> tuple[str, EncoderSettings]:
    """(base name, settings) of `NAME?key=value&...`; InputError naming a bad key or value."""
    if "?" not in name:
        return name, EncoderSettings()
    base, query = name.split("?", 1)
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise InputError(f"encoder {name!r}: settings after '?' must be key=value pairs joined by &") from None
    values: dict[str, Any] = {}
    for key, value in pairs:
        if key == "normalize":
            if value not in ("true", "false"):
                raise InputError(f"encoder {name!r}: normalize must be true or false, got {value!r}")
            values[key] = value == "true"
        else:
            values[key] = value
    try:
        return base, EncoderSettings(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InputError(
            f"encoder {name!r}: setting {field!r}: {first['msg']} (settings: "
            "query_prefix, passage_prefix, pooling=mean|cls, normalize=true|false)"
        ) from None


def encoder_name(base: str, settings: EncoderSettings | None) -> str:
    """The recorded name of an encoder: `base`, plus its settings (sorted, URL-encoded) if any."""
    if settings is None or settings.is_default():
        return base
    items = sorted(settings.model_dump(exclude_none=True).items())
    return base + "?" + urlencode([(k, str(v).lower() if isinstance(v, bool) else v) for k, v in items])
