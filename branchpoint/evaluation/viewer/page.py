"""The viewer's page and its two static files: the routes `/` (and `/index.html`) and
`/static/{name}`, and the page template the static export fills in too. The files ship in the
package (`static/`), so the page needs no network."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

STATIC = Path(__file__).with_name("static")
#: The files `/static/` serves, with their media types; any other name is a 404.
STATIC_FILES = {"viewer.js": "text/javascript; charset=utf-8", "viewer.css": "text/css; charset=utf-8"}


def page_html(mode: str, data_prefix: str = "") -> str:
    """The page template with its mode filled in: `server` (it asks /api/…) or `static` (it loads
    data/*.js files an export wrote beside it)."""
    config = json.dumps({"mode": mode, "data": data_prefix})
    return (STATIC / "index.html").read_text(encoding="utf-8").replace("{{CONFIG}}", config)


async def home(request: Request) -> Response:
    """`/` and `/index.html`: the page in server mode (its data from `/api/`)."""
    return HTMLResponse(page_html("server"))


async def static_file(request: Request) -> Response:
    """`/static/{name}`: viewer.js or viewer.css with its media type; 404 `not found` for any
    other name, so nothing else in the package folder is served."""
    name = request.path_params["name"]
    path = STATIC / name
    if name not in STATIC_FILES or not path.is_file():
        return Response("not found", status_code=404)
    return Response(path.read_bytes(), media_type=STATIC_FILES[name])
