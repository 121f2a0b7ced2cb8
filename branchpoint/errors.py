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
