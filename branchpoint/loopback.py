"""Local HTTP servers closed to other web pages: a Host check and a per-start token (ASGI).

A page on any site can make the browser send requests to 127.0.0.1; by DNS rebinding (its own
name re-pointed at 127.0.0.1) it can even read the answers, since to the browser they come from
its own origin, with its own name in the `Host` header. Two guards, as Jupyter has them:

* `HostCheck` answers 403 to any request whose `Host` is not one of the names the server is
  meant to be reached by: by default the loopback names only (`127.0.0.1`, `localhost`, `[::1]`,
  with or without a port). A rebinding page sends its own name and is refused.
* `TokenCheck` answers 403 unless the request carries the server's token: `?token=T` in the URL
  (the one the command prints), an `Authorization: token T` (or `Bearer T`) header, or the
  cookie the server sets when a URL with the token is opened (`HttpOnly`, `SameSite=Strict`, one
  per port), which the page's own requests then carry. `new_token()` makes one per start.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

#: The names a loopback-only server answers to (a port may follow).
LOOPBACK_NAMES: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    """A random token for one start of a server (48 hex digits)."""
    return secrets.token_hex(24)


def host_name(header: str) -> str:
    """The name of a `Host` header without its port, lower-cased: `[::1]:8765` -> `[::1]`."""
    host = header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def allowed_names(extra: Collection[str] = ()) -> frozenset[str]:
    """The loopback names and `extra` ones (a bare IPv6 address gets its brackets; `*`: any)."""
    names = set(LOOPBACK_NAMES)
    for name in extra:
        name = name.strip().lower()
        names.add(f"[{name}]" if ":" in name and not name.startswith("[") else name)
    return frozenset(names)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = reason.encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class HostCheck:
    """ASGI middleware: 403 for a request whose `Host` is not an allowed name (see module)."""

    def __init__(self, app: ASGIApp, allowed: Collection[str] = LOOPBACK_NAMES) -> None:
        self.app = app
        self.allowed = allowed_names(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and "*" not in self.allowed:
            host = _header(scope, b"host")
            if host is None or host_name(host) not in self.allowed:
                await _refuse(
                    send,
                    403,
                    f"Host {host!r} is not allowed: this server answers to {', '.join(sorted(self.allowed))} "
                    "(a page of another site cannot read it)\n",
                )
                return
        await self.app(scope, receive, send)


class TokenCheck:
    """ASGI middleware: 403 for a request without the server's token (see module); a URL that
    carries it sets the cookie the page's later requests carry."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    def _cookie_name(self, scope: Scope) -> str:
        server = scope.get("server") or ("", 0)
        return f"branchpoint-token-{server[1]}"

    def _given(self, scope: Scope) -> tuple[str | None, bool]:
        """The token the request carries, and whether it came in the URL."""
        query = parse_qs(bytes(scope.get("query_string") or b"").decode("latin-1"))
        if query.get("token"):
            return query["token"][0], True
        auth = _header(scope, b"authorization") or ""
        scheme, _, value = auth.partition(" ")
        if scheme.lower() in ("token", "bearer") and value:
            return value.strip(), False
        cookie = SimpleCookie()
        try:
            cookie.load(_header(scope, b"cookie") or "")
        except Exception:  # a malformed Cookie header: as if none
            return None, False
        morsel = cookie.get(self._cookie_name(scope))
        return (morsel.value if morsel else None), False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given, in_url = self._given(scope)
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            await _refuse(
                send, 403, "a token is needed: open the URL with ?token=... that `branchpoint view` printed\n"
            )
            return
        if not in_url:
            await self.app(scope, receive, send)
            return
        cookie = f"{self._cookie_name(scope)}={self.token}; Path=/; HttpOnly; SameSite=Strict"

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)

        await self.app(scope, receive, send_with_cookie)
