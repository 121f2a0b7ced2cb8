"""The base of every retrieval source kind, and the spec field that picks the kind's class.

A source kind is one pydantic class: it declares `kind` (a `Literal` of its name) and its own
settings, validates them, and opens itself (`open`). It registers with `@source("name")`
(kind `source` of `branchpoint.registry`), so a plug-in adds a kind in one module. The spec's
`retrieval.sources` values are a union discriminated by `kind`: `SourceField` looks the kind up
in the registry (built-ins and plug-ins alike; default `dense`) and validates the settings with
its class, so errors name the source's own fields.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializeAsAny,
    WrapValidator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.registry_kinds import Kind

if TYPE_CHECKING:
    from branchpoint.retrieval.source import RetrievalSource

#: The kind of a source whose settings name none.
DEFAULT_KIND = "dense"

S = TypeVar("S", bound="type[SourceSpec]")


class SourceSpec(BaseModel):
    """A named retrieval source's settings: the base of every source kind (not used directly).

    Subclasses set `kind: Literal["name"] = "name"`, their fields and `open`; they may refine
    `check` (cheap checks before a run writes anything) and `check_data` (read the data, load no
    model). `unused_fields` lists settings of the first release's single source spec that the kind
    does not use: old specs and recorded run folders name them, so each is accepted at its value
    only (`(value, why not)`), and those in `dumped_unused` are written into dumps too;
    `dumped_if_set` fields are left out of dumps at these defaults. Both keep the condition
    fingerprints (and so the execution ids) of existing specs unchanged.
    """

    model_config = ConfigDict(extra="forbid")

    kind: str
    unused_fields: ClassVar[Mapping[str, tuple[Any, str]]] = {}
    dumped_unused: ClassVar[tuple[str, ...]] = ()
    dumped_if_set: ClassVar[Mapping[str, Any]] = {}

    @abstractmethod
    def open(self, name: str, *, progress: bool = False) -> RetrievalSource:
        """The source itself, named `name` (indexes built or loaded as needed)."""

    def check(self, name: str) -> None:
        """Refuse what can be seen without reading data (missing files, unknown names), naming
        the field as `retrieval.sources.NAME.FIELD`; the default checks nothing."""

    def check_data(self) -> None:
        """Read the data the source needs and check saved indexes against it, without loading a
        model (what executors whose workers open the sources run first); default: nothing."""

    @model_validator(mode="before")
    @classmethod
    def _accept_unused_at_their_value(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not cls.unused_fields:
            return data
        data = dict(data)
        for field, (value, why) in cls.unused_fields.items():
            if field in data:
                if data[field] != value:
                    raise PydanticCustomError("source_settings", why)
                del data[field]
        return data

    @model_serializer(mode="wrap")
    def _dump_as_released(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for field, default in self.dumped_if_set.items():
                if field in data and data[field] == default:
                    del data[field]
            for field in self.dumped_unused:
                data[field] = self.unused_fields[field][0]
        return data


#: The typed handle of the registry kind: `REGISTRY.get(SOURCE, name).obj` is a source kind's class.
SOURCE: Kind[type[SourceSpec]] = Kind("source")


def source(kind: str) -> Callable[[S], S]:
    """Register a `SourceSpec` subclass as the source kind `kind` (class decorator)."""

    def register(cls: S) -> S:
        if not (isinstance(cls, type) and issubclass(cls, SourceSpec)):
            raise RegistryError(f'source "{kind}": {cls!r} is not a SourceSpec subclass')
        REGISTRY.add("source", kind, cls)
        return cls

    return register


def source_class(kind: str) -> type[SourceSpec]:
    """The class of the source kind `kind` (registered, or `package.module:Class`)."""
    cls = REGISTRY.get(SOURCE, kind).obj
    if not (isinstance(cls, type) and issubclass(cls, SourceSpec)):
        raise RegistryError(f'source "{kind}": {cls!r} is not a SourceSpec subclass')
    return cls


def _validate_by_kind(data: Any, handler: Any) -> Any:
    """Validate a source's settings with the class of its `kind`."""
    if isinstance(data, SourceSpec):
        return data
    if not isinstance(data, dict):
        raise PydanticCustomError("source_kind", "expected a mapping of source settings")
    kind = data.get("kind", DEFAULT_KIND)
    if not isinstance(kind, str):
        raise PydanticCustomError("source_kind", "kind: expected the name of a source kind")
    try:
        entry = REGISTRY.get("source", kind)
        cls = source_class(kind)
    except RegistryError as exc:
        raise PydanticCustomError("source_kind", "{why}", {"why": str(exc)}) from None
    if entry.name != kind:  # `package.module:Class` of a registered kind: store its own name
        data = {**data, "kind": entry.name}
    return cls.model_validate(data)


class _SchemaOfTheKinds:
    """JSON schema of a source: one of the registered kinds' schemas, discriminated by `kind`."""

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> Any:
        kinds = [e.obj for e in REGISTRY.entries(SOURCE)]
        return {
            "oneOf": [handler(cls.__pydantic_core_schema__) for cls in kinds],
            "discriminator": {"propertyName": "kind"},
        }


#: The type of a spec's source: any registered source kind, picked by `kind` (default dense).
SourceField = Annotated[SerializeAsAny[SourceSpec], WrapValidator(_validate_by_kind), _SchemaOfTheKinds()]
