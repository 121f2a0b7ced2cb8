"""One registry for every pluggable kind of component (policies, judges, sources, ...).

Built-in components register themselves with `@registry.register(kind, name)` (or `registry.add`)
when their module is imported. `get(kind, name)` imports the kind's built-in modules on first use,
then the third-party plug-ins of the entry-point group `branchpoint.plugins` (each entry point
names a module, or a module attribute, whose import registers its components), and finally
resolves `package.module:attr` names for components that are not registered at all. Every kind
follows the same rules: one duplicate rule (a clear error naming both places), `names(kind)`,
unknown names answered with the list of known ones, and one way to declare settings: a
component registered with `settings=SomePydanticModel` takes settings (from a spec section or a
command line's `--…-arg KEY=VALUE`), validated by `check_settings` with errors naming the key
and what it expects; one registered without takes none.

Every kind has a contract (`registry_kinds.CONTRACTS`): what a component of it must be and the
metadata fields it may carry. `add` checks both, and so does `get` for a `package.module:attr`
it resolves, so a component that does not fit is refused with its name, kind and what is
missing. `get(Kind[T](kind), name)` is an `Entry[T]` to the type checker; each kind's module
declares its typed handle.

This module imports nothing of branchpoint's beyond `errors` (and the contracts beside it), so
every layer may register here.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import sys
import tokenize
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Generic, TypeVar, overload

from pydantic import BaseModel, ValidationError

from branchpoint.errors import InputError, check_nesting
from branchpoint.registry_kinds import CONTRACTS, Kind, KindContract, article

T = TypeVar("T")
C = TypeVar("C")

#: The entry-point group third-party packages use to add components.
PLUGIN_GROUP: Final = "branchpoint.plugins"

#: Every pluggable kind and the modules whose import registers its built-in components.
BUILTIN_MODULES: Final[dict[str, tuple[str, ...]]] = {
    "policy": ("branchpoint.agents.policies",),
    "judge": ("branchpoint.evaluation.judges", "branchpoint.evaluation.llm_judges"),
    "source": ("branchpoint.retrieval.sources",),
    "encoder": ("branchpoint.retrieval.encoder",),
    "index": ("branchpoint.retrieval.index_kinds",),
    "question_format": ("branchpoint.datasets",),
    "provider": ("branchpoint.models.factory", "branchpoint.sim.provider"),
    "reward": ("branchpoint.evaluation.value.rewards", "branchpoint.evaluation.value.objectives"),
    "forecaster": ("branchpoint.evaluation.value.forecasters", "branchpoint.evaluation.value.fitted"),
    "calibrator": ("branchpoint.evaluation.value.forecasters", "branchpoint.evaluation.value.fitted"),
    "router": ("branchpoint.evaluation.value.routers",),
}
KINDS: Final[tuple[str, ...]] = tuple(BUILTIN_MODULES)
"""Every pluggable kind the registry holds (policy, judge, source, ..., router)."""


class RegistryError(InputError):
    """A name registered twice, an unknown kind or name, or a `module:attr` that cannot be found."""


@dataclass(frozen=True)
class Entry(Generic[C]):
    """One registered component: what it is, where it was registered, and its metadata (its
    settings model under `settings`, when it takes settings)."""

    kind: str
    name: str
    obj: C
    origin: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def settings_model(self) -> type[BaseModel] | None:
        """The pydantic model of the component's settings (None: it takes no settings)."""
        model = self.meta.get("settings")
        return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def describe_settings_error(exc: ValidationError, model: type[BaseModel]) -> str:
    """One clause per problem: `setting "a.b": what it expects (got …)`; an unknown key lists
    the settings the model takes."""
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(settings)"
        if err.get("type") == "extra_forbidden":
            parts.append(f'setting "{key}": unknown (takes: {", ".join(model.model_fields) or "none"})')
            continue
        got = f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict) else ""
        parts.append(f'setting "{key}": {err["msg"]}{got}')
    return "; ".join(parts)


def parse_yaml_value(raw: str, where: str) -> Any:
    """A command-line value read as YAML (`3`, `0.9`, `true`, `[1, 2]`, `{a: b}`; empty: "")."""
    import yaml

    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise InputError(f"{where}: the value is not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except RecursionError:
        raise InputError(f"{where}: the value is nested too deeply to read") from None
    check_nesting(value, where)
    return value


def settings_from_args(values: Sequence[str], option: str, *, named: bool = False) -> dict[str, Any]:
    """Repeatable `KEY=VALUE` options (e.g. `--judge-arg threshold=0.9`) as a settings mapping.

    VALUE is YAML; a dotted KEY sets a nested setting (`model.name=m` → `{model: {name: m}}`);
    a later option wins. With `named`, KEY starts with a component's name, `NAME.KEY=VALUE`
    (`--forecaster-arg metadata_ridge.folds=3`), giving `{NAME: {KEY: VALUE}}`; a
    `package.module:attr` name keeps its dots (`my.mod:fn.folds=3`).
    """
    out: dict[str, Any] = {}
    example = "NAME.KEY=VALUE" if named else "KEY=VALUE"
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip()
        where = f"{option} {item!r}"
        parts = key.split(".")
        if named and ":" in key:
            module, _, rest = key.partition(":")
            head, *tail = rest.split(".")
            parts = [f"{module}:{head}", *tail]
        if not sep or not key or any(not p for p in parts) or (named and len(parts) < 2):
            shown = "public_prefix_ridge.folds=3" if named else "threshold=0.9"
            raise InputError(f"{where}: expected {example} (a YAML value), e.g. {option} {shown}")
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise InputError(f"{where}: {'.'.join(parts[: i + 1])} was given a value, not settings")
            node = child
        node[parts[-1]] = parse_yaml_value(raw, where)
    return out


def merge_settings(base: Mapping[str, Any] | None, update: Mapping[str, Any] | None) -> dict[str, Any]:
    """`base` with `update` applied: nested mappings merge key by key, anything else replaces."""
    out = dict(base or {})
    for key, value in (update or {}).items():
        old = out.get(key)
        out[key] = merge_settings(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return out


def validate_settings(model: type[BaseModel] | None, settings: Mapping[str, Any] | None, what: str) -> BaseModel | None:
    """A component's settings validated against its settings model (None for a component without
    one, which then takes no settings); `what` names it in errors (`judge "llm"`). Unknown keys
    are refused even when the model does not forbid them itself, so a misspelt setting is never
    silently ignored."""
    given = dict(settings or {})
    if model is None:
        if given:
            raise RegistryError(f"{what} takes no settings (got: {', '.join(map(str, given))})")
        return None
    if model.model_config.get("extra") != "allow":
        unknown = [k for k in given if k not in model.model_fields]
        if unknown:
            raise RegistryError(
                f'{what}: setting "{unknown[0]}": unknown (takes: {", ".join(model.model_fields) or "none"})'
            )
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        raise RegistryError(f"{what}: {describe_settings_error(exc, model)}") from None


def _origin_of(obj: Any) -> str:
    """`module:qualname` of an object (its definition place), for duplicate and listing messages."""
    module = getattr(obj, "__module__", None) or type(obj).__module__
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    code = getattr(inspect.unwrap(obj), "__code__", None) if callable(obj) else None
    if code is not None:  # a function: its first line, without reading (or parsing) its source file
        return f"{module}:{qualname} (line {code.co_firstlineno})"
    try:
        line = inspect.getsourcelines(obj)[1]
        where = f" (line {line})"
    except (OSError, TypeError, SyntaxError, tokenize.TokenError):  # no file, or not the file it came from
        where = ""
    return f"{module}:{qualname}{where}"


def _same_definition(a: Any, b: Any) -> bool:
    """Whether two objects are one definition (the same object, or the same module:qualname, as
    when a module is imported twice under different loaders)."""
    if a is b:
        return True
    key_a = (getattr(a, "__module__", None), getattr(a, "__qualname__", None))
    key_b = (getattr(b, "__module__", None), getattr(b, "__qualname__", None))
    return key_a == key_b and key_a[1] is not None


@contextmanager
def _on_path(search_paths: Sequence[str | Path]) -> Iterator[None]:
    """`search_paths` and the working directory on `sys.path` for the duration of an import."""
    added = [str(Path(p).resolve()) for p in [*search_paths, Path.cwd()]]
    added = [p for p in dict.fromkeys(added) if p not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for p in added:
            if p in sys.path:
                sys.path.remove(p)


def import_module_from(module_name: str, search_paths: Sequence[str | Path] = ()) -> Any:
    """Import `module_name` with `search_paths` (e.g. the spec's folder) and the working directory
    on the import path for the duration of the import."""
    with _on_path(search_paths):
        return importlib.import_module(module_name)


def import_attr(ref: str, search_paths: Sequence[str | Path] = (), *, kind: str = "component") -> Any:
    """The object `package.module:attr` names (dotted attributes allowed after the colon)."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise RegistryError(f'{kind} "{ref}": expected package.module:attr')
    try:
        obj = import_module_from(module_name, search_paths)
    except ImportError as exc:
        raise RegistryError(f'{kind} "{ref}": cannot import module "{module_name}": {exc}') from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RegistryError(f'{kind} "{ref}": module "{module_name}" has no attribute "{attr}"') from None
    return obj


class Registry:
    """Components by (kind, name). One instance, `REGISTRY`, serves the package; tests may build
    their own to check the rules without touching it."""

    def __init__(
        self,
        builtin_modules: dict[str, tuple[str, ...]] | None = None,
        plugin_group: str = PLUGIN_GROUP,
        contracts: Mapping[str, KindContract] = CONTRACTS,
    ) -> None:
        self._builtin_modules = dict(BUILTIN_MODULES if builtin_modules is None else builtin_modules)
        self._contracts = dict(contracts)
        self._plugin_group = plugin_group
        self._entries: dict[tuple[str, str], Entry[Any]] = {}
        self._loaded_kinds: set[str] = set()
        self._plugins_loaded = False
        # What `get` handed out, newest count last: the components a command used (provenance).
        self._resolved: dict[tuple[str, str], tuple[int, Entry[Any]]] = {}
        self._resolutions = 0

    # -- registering -----------------------------------------------------------------------
    def _check_kind(self, kind: str) -> None:
        if kind not in self._builtin_modules:
            raise RegistryError(f'unknown component kind "{kind}" (known: {", ".join(self._builtin_modules)})')

    def check_component(self, kind: str, name: str, obj: Any, meta: Mapping[str, Any], origin: str) -> None:
        """RegistryError unless `obj` (with `meta`) fits the kind's contract, naming the
        component, its kind, where it comes from and what is missing."""
        contract = self._contracts.get(kind)
        if contract is None:  # a kind of a test's own registry, without a contract
            return
        problem = contract.problem(obj, meta)
        if problem is not None:
            raise RegistryError(f'{kind} "{name}" ({origin}): {problem} ({article(kind)} {kind} is {contract.what})')

    def add(self, kind: str, name: str, obj: Any, *, origin: str | None = None, **meta: Any) -> Entry[Any]:
        """Register `obj` as the `kind` called `name`, checked against the kind's contract.
        Registering the same definition again (a module imported twice, or reloaded) replaces
        the entry; a different object under a taken name is an error that names both places."""
        self._check_kind(kind)
        if not name or ":" in name:
            raise RegistryError(f'{kind} name "{name}": names are non-empty and contain no ":"')
        entry = Entry(kind, name, obj, origin or _origin_of(obj), dict(meta))
        self.check_component(kind, name, obj, entry.meta, entry.origin)
        old = self._entries.get((kind, name))
        if old is not None and not _same_definition(old.obj, obj):
            raise RegistryError(f'{kind} "{name}" is registered twice: by {old.origin} and by {entry.origin}')
        self._entries[(kind, name)] = entry
        return entry

    def remove(self, kind: str, name: str) -> None:
        """Take the `kind` called `name` out (nothing when absent): for a component registered
        only for a while, such as validate's canary forecaster."""
        self._entries.pop((kind, name), None)

    def register(self, kind: str, name: str, **meta: Any) -> Callable[[T], T]:
        """Decorator form of `add`: `@REGISTRY.register("judge", "contains")`."""

        def decorate(obj: T) -> T:
            self.add(kind, name, obj, **meta)
            return obj

        return decorate

    # -- loading ---------------------------------------------------------------------------
    def _load(self, kind: str) -> None:
        """Import the kind's built-in modules (once), then every plug-in (once)."""
        self._check_kind(kind)
        if kind not in self._loaded_kinds:
            self._loaded_kinds.add(kind)
            for module in self._builtin_modules[kind]:
                importlib.import_module(module)
        self.load_plugins()

    def load_plugins(self) -> list[str]:
        """Import each entry point of the plug-in group (once per registry); returns their names.
        A plug-in that fails to import is an error naming it and its distribution."""
        if self._plugins_loaded:
            return []
        self._plugins_loaded = True
        loaded = []
        for ep in importlib.metadata.entry_points(group=self._plugin_group):
            try:
                target = ep.load()
            except Exception as exc:  # a broken plug-in must say which one it is
                dist = getattr(ep.dist, "name", "?")
                raise RegistryError(
                    f'plug-in "{ep.name}" ({ep.value}, distribution {dist}) failed to load: {exc}'
                ) from exc
            if callable(target) and not inspect.ismodule(target) and getattr(target, "__branchpoint_plugin__", False):
                target(self)
            loaded.append(ep.name)
        return loaded

    # -- looking up ------------------------------------------------------------------------
    def names(self, kind: str) -> list[str]:
        """Registered names of a kind, sorted (built-ins and plug-ins)."""
        self._load(kind)
        return sorted(name for k, name in self._entries if k == kind)

    @overload
    def entries(self, kind: Kind[C], *, registration_order: bool = False) -> list[Entry[C]]: ...

    @overload
    def entries(self, kind: str, *, registration_order: bool = False) -> list[Entry[Any]]: ...

    def entries(self, kind: str | Kind[Any], *, registration_order: bool = False) -> list[Entry[Any]]:
        """Registered entries of a kind, in name order (or in the order they were registered);
        `kind` as in `get`."""
        kind = kind.name if isinstance(kind, Kind) else kind
        if registration_order:
            self._load(kind)
            return [e for (k, _), e in self._entries.items() if k == kind]
        return [self._entries[(kind, n)] for n in self.names(kind)]

    @overload
    def get(self, kind: Kind[C], name: str, search_paths: Sequence[str | Path] = ()) -> Entry[C]: ...

    @overload
    def get(self, kind: str, name: str, search_paths: Sequence[str | Path] = ()) -> Entry[Any]: ...

    def get(self, kind: str | Kind[Any], name: str, search_paths: Sequence[str | Path] = ()) -> Entry[Any]:
        """The entry registered as `name`, or, for `package.module:attr`, the object it names
        (its registered entry when importing it registered one; else checked against the kind's
        contract). Unknown names list the known. `kind` is a kind's name, or its typed handle
        (`Kind[T]`), for an `Entry[T]`."""
        kind = kind.name if isinstance(kind, Kind) else kind
        self._load(kind)
        found = self._entries.get((kind, name))
        if found is not None:
            return self.note_used(found)
        if ":" in name:
            obj = import_attr(name, search_paths, kind=kind)
            for entry in self._entries.values():
                if entry.kind == kind and entry.obj is obj:
                    return self.note_used(entry)
            self.check_component(kind, name, obj, {}, name)
            return self.note_used(Entry(kind, name, obj, name))
        known = ", ".join(self.names(kind)) or "none"
        raise RegistryError(f'unknown {kind} "{name}" (known: {known}; or name your own as package.module:attr)')

    def check_settings(
        self, kind: str, name: str, settings: Mapping[str, Any] | None, search_paths: Sequence[str | Path] = ()
    ) -> BaseModel | None:
        """The settings of the `kind` called `name`, validated against its settings model (None
        for one that takes no settings); see `validate_settings`."""
        entry = self.get(kind, name, search_paths)
        return validate_settings(entry.settings_model, settings, f'{kind} "{entry.name}"')

    # -- what was used (for provenance) --------------------------------------------------------
    def note_used(self, entry: Entry[C]) -> Entry[C]:
        """Count `entry` as used now (`get` does this for every entry it returns; a caller that
        uses entries it enumerated, as `value` scores every forecaster, calls it itself)."""
        self._resolutions += 1
        self._resolved[(entry.kind, entry.name)] = (self._resolutions, entry)
        return entry

    def usage_mark(self) -> int:
        """A mark to pass to `used_since`: entries used after this call are newer than it."""
        return self._resolutions

    def used_since(self, mark: int = 0) -> list[Entry[Any]]:
        """The entries used (returned by `get`, or `note_used`) after `mark`, in order of last use."""
        newer = sorted((pair for pair in self._resolved.values() if pair[0] > mark), key=lambda pair: pair[0])
        return [entry for _, entry in newer]

    def __contains__(self, key: tuple[str, str]) -> bool:
        kind, _name = key
        self._load(kind)
        return key in self._entries


REGISTRY: Final = Registry()
"""The package's registry (filled at import time by the built-in modules and by plug-ins)."""

register = REGISTRY.register
add = REGISTRY.add
get = REGISTRY.get
names = REGISTRY.names
entries = REGISTRY.entries
check_settings = REGISTRY.check_settings


def plugin(fn: Callable[[Registry], None]) -> Callable[[Registry], None]:
    """Mark a function an entry point may name: it is called with the registry to register its
    components (the alternative to a module whose import registers them with decorators)."""
    fn.__branchpoint_plugin__ = True  # type: ignore[attr-defined]
    return fn
