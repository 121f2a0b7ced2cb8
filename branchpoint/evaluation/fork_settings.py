"""Fork settings: what makes a branch the branch it is, and the refusal to pool different ones.

A branch's *fork settings* are everything that changes which continuation its repeats draw:

- `depth` (1 for a branch of a run's execution, 2 for a branch of a branch, ...);
- `search_budget` (SEARCH and SWITCH branches only: THINK and STOP never search, so a THINK
  branch is the same branch under any budget, and fork studies share it);
- `switch_source` (SWITCH branches only);
- the sampling **as sent** (`record.sampling`, taken from the request body), without the seed
  and without penalties at their neutral value (a completion request sends
  `frequency_penalty: 0`, a chat request leaves it out: the same draw).

Not in them: the repeat index and the seed (base and per-branch). Repeats of the same settings
drawn by two `fork` invocations with different `--seed` are more draws of the same thing, and
pool. Records written since the fingerprint exists carry `fork_settings` and `fork_fingerprint`;
for older ones both are derived from the condition's `fork.*` keys and `sampling`.

A set of branches *mixes* fork settings when some setting has two values among the branches
that have it: SEARCH at budget 1 and at budget 3, or THINK at temperature 0.6 beside SEARCH at
1.0. `choose` refuses that by default with one line naming the setting and its values, keeps only
the branches compatible with `--fork-settings FINGERPRINT`, or pools them all with
`--mix-fork-settings` (and says which in the output file).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from branchpoint.errors import InputError
from branchpoint.traces import ExecutionRecord

#: Settings only some actions have: a branch without one is compatible with every value of it.
ACTION_SETTINGS = ("search_budget", "switch_source")
#: Sampling fields at these values send the same draw as leaving them out.
NEUTRAL_SAMPLING: dict[str, float] = {
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
    "repeat_penalty": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
}
#: Record sampling fields that are not settings (a draw's own number).
NOT_SETTINGS = frozenset({"seed"})
_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _number(value: Any) -> Any:
    """Numbers as floats (0.6 and 1 vs 1.0 must give one fingerprint), everything else as is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


def derive_settings(record: ExecutionRecord) -> dict[str, Any] | None:
    """The fork settings of a branch or replay from its condition and sampling (None for a
    record that is neither): the rule `fork` writes them by, and how older records are read."""
    if record.parent is None:
        return None
    cond = record.condition
    settings: dict[str, Any] = {"depth": int(cond.get("fork.depth", 1))}
    if "fork.search_budget" in cond:
        settings["search_budget"] = int(cond["fork.search_budget"])
    if "fork.switch_source" in cond:
        settings["switch_source"] = cond["fork.switch_source"]
    sampling = dict(record.sampling or {})
    for key, cond_key in (("temperature", "fork.temperature"), ("top_p", "fork.top_p")):
        if key not in sampling and cond_key in cond and not record.sampling:
            sampling[key] = cond[cond_key]  # a record without sampling: its plan's
    for key, value in sampling.items():
        if key in NOT_SETTINGS or value is None:
            continue
        value = _number(value)
        if NEUTRAL_SAMPLING.get(key) == value:
            continue
        settings[key] = value
    return settings


def settings_of(record: ExecutionRecord) -> dict[str, Any] | None:
    """A branch's fork settings as recorded, or derived for a record written before they were."""
    return record.fork_settings if record.fork_settings is not None else derive_settings(record)


def fingerprint(settings: dict[str, Any]) -> str:
    """A short stable hash of fork settings (12 hex digits)."""
    text = json.dumps({k: _number(v) for k, v in settings.items()}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def fingerprint_of(record: ExecutionRecord) -> str | None:
    """A branch's fork fingerprint as recorded, or derived (None for a record that is no branch)."""
    if record.fork_fingerprint is not None:
        return record.fork_fingerprint
    settings = settings_of(record)
    return None if settings is None else fingerprint(settings)


def with_fork_settings(record: ExecutionRecord) -> ExecutionRecord:
    """The branch record with its fork settings and fingerprint filled in (from its condition
    and its sampling as sent)."""
    settings = derive_settings(record)
    if settings is not None:
        record.fork_settings = settings
        record.fork_fingerprint = fingerprint(settings)
    return record


def describe(settings: dict[str, Any], keys: Iterable[str] | None = None) -> str:
    """`search_budget=3, temperature=0.6` (all settings, or `keys` only); absent ones as `unset`."""
    names = list(keys) if keys is not None else sorted(settings)
    return ", ".join(f"{k}={_show(settings.get(k, 'unset'))}" for k in names)


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class ForkSettingsChoice(BaseModel):
    """Which fork settings an estimate may read: one fingerprint (`fingerprint`, a unique start
    of one), all of them pooled (`mix`), or by default one only (refusing a mix)."""

    model_config = ConfigDict(frozen=True)

    fingerprint: str | None = None
    mix: bool = False


def compatible(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two settings that describe one study: equal wherever both have a setting, and on every
    setting that is not action-specific (absent counts as a value there)."""
    for key in set(a) | set(b):
        if key in ACTION_SETTINGS and (key not in a or key not in b):
            continue
        if _number(a.get(key)) != _number(b.get(key)):
            return False
    return True


_SKIP = object()


def _value(settings: dict[str, Any], key: str) -> Any:
    """A setting's value for the mix check: `_SKIP` for an action-specific one the branch lacks,
    `unset` for another absent one."""
    if key in ACTION_SETTINGS and key not in settings:
        return _SKIP
    return _number(settings.get(key, "unset"))


def conflict(settings: Sequence[dict[str, Any]]) -> tuple[str, list[Any]] | None:
    """The first setting with two or more values among `settings`, with its values; None when
    they agree."""
    for key in sorted({k for s in settings for k in s}):
        values: list[Any] = []
        for s in settings:
            value = _value(s, key)
            if value is not _SKIP and value not in values:
                values.append(value)
        if len(values) > 1:
            return key, values
    return None


def _words(n: int) -> str:
    return _NUMBERS[n] if n < len(_NUMBERS) else str(n)


def _refusal(where: str, records: Sequence[ExecutionRecord], key: str, values: list[Any], scope: str) -> InputError:
    """One line naming the setting, its values and the fingerprints that hold each."""
    parts = []
    for value in values:
        fps = sorted({fingerprint_of(r) or "" for r in records if _value(settings_of(r) or {}, key) == value})
        parts.append(f"{key}={_show(value)} (fingerprint {' / '.join(fps)})")
    return InputError(
        f"{where} holds branches of {_words(len(values))} fork settings{scope}: {' vs '.join(parts)}; "
        "pass --mix-fork-settings to pool them, or --fork-settings FINGERPRINT to choose one"
    )


def _chosen_settings(records: Sequence[ExecutionRecord], wanted: str, where: str) -> dict[str, Any]:
    """The settings of the one fingerprint that starts with `wanted`; InputError listing them."""
    known: dict[str, dict[str, Any]] = {}
    for r in records:
        fp, s = fingerprint_of(r), settings_of(r)
        if fp is not None and s is not None:
            known.setdefault(fp, s)
    matches = [fp for fp in known if fp.startswith(wanted)]
    if len(matches) != 1:
        listing = "; ".join(f"{fp}: {describe(s)}" for fp, s in sorted(known.items()))
        what = "no" if not matches else f"{len(matches)}"
        raise InputError(f"--fork-settings {wanted}: {what} fork settings of {where} match (it holds {listing})")
    return known[matches[0]]


def choose(
    records: Sequence[ExecutionRecord],
    choice: ForkSettingsChoice,
    where: str,
    *,
    group: Callable[[ExecutionRecord], Any] | None = None,
    scope: str = "",
) -> tuple[list[ExecutionRecord], dict[str, Any]]:
    """The records an estimate reads under `choice`, and a summary for its output file.

    Records that are no branches are always kept. `group` (e.g. the condition) limits the mix
    check to records of one group (`evaluate` keeps conditions apart anyway); `scope` words the
    group in the refusal. Refuses (InputError) a mix that `choice` does not allow.
    """
    branches = [r for r in records if settings_of(r) is not None]
    kept = list(records)
    if choice.fingerprint is not None:
        wanted = _chosen_settings(branches, choice.fingerprint, where)
        kept = [r for r in records if (s := settings_of(r)) is None or compatible(s, wanted)]
        branches = [r for r in kept if settings_of(r) is not None]
    if not choice.mix:
        groups: dict[str, list[ExecutionRecord]] = {}
        for r in branches:
            key = json.dumps(group(r), sort_keys=True, default=str) if group is not None else ""
            groups.setdefault(key, []).append(r)
        for members in groups.values():
            found = conflict([settings_of(r) or {} for r in members])
            if found is not None:
                label = f" in one condition ({members[0].condition})" if group is not None else scope
                raise _refusal(where, members, *found, label)
    counts: dict[str, dict[str, Any]] = {}
    for r in branches:
        fp = fingerprint_of(r) or ""
        entry = counts.setdefault(fp, {"settings": settings_of(r), "branches": 0})
        entry["branches"] += 1
    summary = {
        "chosen": choice.fingerprint,
        "mixed": choice.mix and conflict([settings_of(r) or {} for r in branches]) is not None,
        "mix_allowed": choice.mix,
        "left_out": len(records) - len(kept),
        "fingerprints": dict(sorted(counts.items())),
    }
    return kept, summary


def differing(settings: Sequence[dict[str, Any]]) -> list[str]:
    """The settings that take two or more values among `settings` (the ones that tell them apart)."""
    keys = []
    for key in sorted({k for s in settings for k in s}):
        values = {repr(v) for s in settings if (v := _value(s, key)) is not _SKIP}
        if len(values) > 1:
            keys.append(key)
    return keys


def view_groups(
    settings: Sequence[dict[str, Any]], choice: ForkSettingsChoice, chosen: dict[str, Any] | None = None
) -> tuple[list[str | None], str | None]:
    """How the viewer shows the branches of one saved state: per branch a tag (None: the group
    its success rates and Δ come from; else the settings that set it apart, shown on its own), and
    a note when the state's branches mix fork settings. Follows `choose`: a mix is kept apart
    unless `choice.mix`; `chosen` (the settings of `choice.fingerprint`) picks the main group."""
    found = conflict(settings)
    if found is None:
        return [None] * len(settings), None
    keys = differing(settings)
    what = f"{_words(len(found[1]))} fork settings ({', '.join(keys)})"
    if choice.mix:
        return [None] * len(settings), f"pools branches of {what}, as value.json does (--mix-fork-settings)"

    def tag(s: dict[str, Any]) -> str | None:  # a THINK branch shared by two budgets has none
        own = [k for k in keys if _value(s, k) is not _SKIP]
        return describe(s, own) if own else None

    main = [chosen is not None and compatible(s, chosen) for s in settings]
    if chosen is not None and conflict([s for s, m in zip(settings, main) if m]) is None:
        tags = [None if m else tag(s) or "" for s, m in zip(settings, main)]
        return tags, f"branches of {what}: the rates and Δ use value.json's --fork-settings {choice.fingerprint}"
    return [tag(s) for s in settings], (
        f"branches of {what}, shown apart; no Δ (value refuses the mix: --fork-settings or --mix-fork-settings)"
    )
