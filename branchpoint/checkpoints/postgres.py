"""PostgreSQL checkpoints (`langgraph-checkpoint-postgres`) for runs at scale.

One `PostgresSaver` backed by a `psycopg_pool.ConnectionPool`; share it for all threads of a run.
Connections are opened the way the library requires: autocommit, prepare_threshold=0 (safe
behind pgbouncer), dict_row. Passwords never appear in messages or logs: URLs are masked.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from branchpoint.checkpoints.serde import safe_serde
from branchpoint.errors import InputError

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

log = logging.getLogger(__name__)

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_INSTALL_HINT = "pip install 'langgraph-checkpoint-postgres==3.2.0' 'psycopg[binary]' psycopg-pool"
_SECRET_KEYS = {"password", "sslpassword"}
_SETUP_LOCK = 0x6272616E6368  # "branch": advisory lock key for setup()


def is_postgres_url(target: object) -> bool:
    """True for a `postgresql://` or `postgres://` URL (case-insensitive scheme)."""
    return isinstance(target, str) and target.strip().lower().startswith(POSTGRES_SCHEMES)


def mask_url(url: str) -> str:
    """`url` with its password (in the user-info part or a `password=` parameter) as `***`."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hosts = netloc.rpartition("@")
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{hosts}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(k.lower() in _SECRET_KEYS for k, _ in pairs):
                query = urlencode([(k, "***" if k.lower() in _SECRET_KEYS else v) for k, v in pairs], safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<unparseable PostgreSQL URL>"


def _scrub(text: str, url: str) -> str:
    """Remove any password of `url` that a driver message might echo back."""
    try:
        parts = urlsplit(url)
        secrets = [parts.password or ""] + [
            v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() in _SECRET_KEYS
        ]
    except ValueError:
        secrets = []
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text.replace(url, mask_url(url))


def _missing_packages(exc: ImportError) -> InputError:
    """The error for a PostgreSQL package that is not installed: one line saying what to pip install."""
    return InputError(f"PostgreSQL checkpoints need packages that are not installed ({exc.name}): {_INSTALL_HINT}")


def _check_pool_size(pool_size: int) -> None:
    """Refuse a pool that could hold no connection."""
    if pool_size < 1:
        raise InputError(f"checkpoints pool_size: must be at least 1, got {pool_size}")


def _unreachable(exc: Exception, url: str) -> InputError:
    """The error for a probe connection that failed: the driver's first line (refused, unknown
    host, auth failed), passwords scrubbed, naming the masked URL."""
    text = str(exc).strip()
    reason = _scrub(text.splitlines()[0] if text else type(exc).__name__, url)
    return InputError(f"cannot reach the PostgreSQL checkpoint store {mask_url(url)}: {reason}")


def _pool_failed(exc: Exception, url: str) -> InputError:
    """The error for a pool that did not open in time (PoolTimeout and friends)."""
    return InputError(
        f"cannot open a connection pool to the PostgreSQL checkpoint store {mask_url(url)}: {_scrub(str(exc), url)}"
    )


@contextmanager
def postgres_checkpointer(url: str, pool_size: int = 8, connect_timeout: float = 10.0) -> Iterator[PostgresSaver]:
    """A `PostgresSaver` on `url`, backed by a connection pool of at most `pool_size` connections.

    Creates the checkpoint tables on first use (`setup()`, idempotent). Raises `InputError`
    naming the (masked) URL when the server cannot be reached, and one line saying what to pip
    install when the PostgreSQL packages are missing.

    Note: `PostgresSaver` serialises its own database calls with one lock per saver, so the pool
    mainly gives health-checked, reconnecting connections; the agent work between checkpoint
    writes still runs in parallel.
    """
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool
    except ImportError as exc:
        raise _missing_packages(exc) from None
    _check_pool_size(pool_size)

    # One direct connection first: the driver's reason (refused, unknown host, auth failed) makes
    # a clear message, where the pool would only time out and retry in the background.
    try:
        probe = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(connect_timeout)))
    except psycopg.Error as exc:
        raise _unreachable(exc, url) from None

    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=pool_size,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=ConnectionPool.check_connection,
        name="branchpoint-checkpoints",
        open=False,
    )
    try:
        with probe:
            try:
                pool.open(wait=True, timeout=connect_timeout)
            except Exception as exc:  # PoolTimeout and friends
                raise _pool_failed(exc, url) from None
            # The pool's connections return dict rows (row_factory in kwargs, which the stubs cannot see).
            dict_pool = cast("ConnectionPool[psycopg.Connection[dict[str, Any]]]", pool)
            saver = PostgresSaver(dict_pool, serde=safe_serde())
            # setup() runs the migrations; an advisory lock (held on the probe connection) keeps
            # several processes of a sharded run, e.g. Ray workers, from racing on them.
            probe.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK,))
            try:
                saver.setup()
            finally:
                probe.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
        log.info("PostgreSQL checkpoints at %s (pool of at most %d)", mask_url(url), pool_size)
        yield saver
    finally:
        pool.close()


@asynccontextmanager
async def async_postgres_checkpointer(
    url: str, pool_size: int = 8, connect_timeout: float = 10.0
) -> AsyncIterator[AsyncPostgresSaver]:
    """An `AsyncPostgresSaver` on `url` for graphs run on the current event loop, backed by an
    async pool of at most `pool_size` connections; the tables are set up as by
    `postgres_checkpointer` (same advisory lock), and failures say the same things."""
    try:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as exc:
        raise _missing_packages(exc) from None
    _check_pool_size(pool_size)
    try:
        probe = await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=max(1, int(connect_timeout))
        )
    except psycopg.Error as exc:
        raise _unreachable(exc, url) from None
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=pool_size,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=AsyncConnectionPool.check_connection,
        name="branchpoint-checkpoints-async",
        open=False,
    )
    try:
        async with probe:
            try:
                await pool.open(wait=True, timeout=connect_timeout)
            except Exception as exc:  # PoolTimeout and friends
                raise _pool_failed(exc, url) from None
            saver = AsyncPostgresSaver(pool, serde=safe_serde())
            await probe.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK,))
            try:
                await saver.setup()
            finally:
                await probe.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
        yield saver
    finally:
        await pool.close()
