"""Errors meant for people: each message names the file, line or field and what was expected."""


class BranchpointError(Exception):
    """Base class for errors the command line prints as one clear line (exit code 2)."""


class InputError(BranchpointError):
    """Bad input: a file, spec field or name that does not match what was expected."""


class StaleIndexError(InputError):
    """An index that was built from another corpus or with another encoder than asked for."""


class ModelServerError(BranchpointError):
    """A model server that could not be started, reached or understood."""


class DamagedFileError(InputError):
    """A database file of a run (checkpoints, retrieval or judge cache) that SQLite cannot read."""


class NoSpaceError(BranchpointError):
    """A write that failed because the file system is full (see `branchpoint.diskspace`)."""


#: Deepest nesting of lists and mappings accepted in a spec, a question or a forecast: deeper
#: input is refused with one line instead of exhausting the parser's (or a later step's) stack.
MAX_NESTING = 64


def nesting_depth(value: object, limit: int = MAX_NESTING) -> int:
    """How deeply lists and mappings nest in `value` (a scalar: 0), counted without recursion and
    stopping once past `limit`."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def check_nesting(value: object, where: str, limit: int = MAX_NESTING) -> None:
    """InputError when `value` nests lists and mappings deeper than `limit` levels."""
    if nesting_depth(value, limit) > limit:
        raise InputError(f"{where}: nested deeper than {limit} levels of lists and mappings (is this the right file?)")
