"""A retrieval source backed by any Search-R1-style HTTP retriever (ours or Search-R1's own).

It POSTs `{"queries": [q], "topk": k, "return_scores": true}` to `<url>/retrieve` and turns each
`{"document": {"id", "contents"}, "score"}` into a `RetrievedDoc`: the first line of `contents`
is the title (surrounding quotes stripped, FlashRAG's `"Title"\\ntext`), the rest the text. A
document without an `id` gets `h-<16 hex of sha256(contents)>`, stable across calls and servers.

Failures: connection errors, timeouts and HTTP 5xx are retried (`retries` times, exponential
back-off); if they persist, `RetrievalUnavailableError` (also a models `TransportError`, so the
runner records the execution as `incomplete` and a rerun retries it). A 4xx answer or a response
that is not the Search-R1 shape raises `RetrievalServerError` at once (retrying cannot help).
Both messages name the URL.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from branchpoint.errors import BranchpointError, InputError
from branchpoint.models.call import TransportError
from branchpoint.redact import redact, redact_optional
from branchpoint.retrieval.corpus import split_contents
from branchpoint.traces import RetrievedDoc


class RetrievalServerError(BranchpointError):
    """A retrieval server refused the request or answered something that is not Search-R1's shape."""


class RetrievalUnavailableError(RetrievalServerError, TransportError):
    """A retrieval server that could not be reached or kept failing (5xx) after the retries."""


class _Retryable(Exception):
    """A 5xx answer: worth another attempt."""


def retrieve_url(url: str) -> str:
    """The `/retrieve` endpoint of a server: `url` itself if it ends so, else `url` + `/retrieve`."""
    url = url.strip()
    if not url.startswith(("http://", "https://")):
        raise InputError(f"retrieval server url {url!r}: expected http://HOST:PORT[/retrieve]")
    url = url.rstrip("/")
    return url if url.endswith("/retrieve") else f"{url}/retrieve"


def content_id(contents: str) -> str:
    """A stable id for a document that came without one: `h-` + 16 hex of sha256(contents)."""
    return "h-" + hashlib.sha256(contents.encode("utf-8")).hexdigest()[:16]


class SearchR1Source:
    """A RetrievalSource that searches a Search-R1-compatible server over HTTP.

    Thread-safe (one pooled httpx client). `cache_params` is the endpoint URL, so the persistent
    retrieval cache keeps results of different servers apart. Close it (or use `with`) to release
    its connections.
    """

    def __init__(self, name: str, url: str, timeout_s: float = 30.0, retries: int = 2) -> None:
        if timeout_s <= 0:
            raise InputError(f"source {name!r}: timeout_s must be positive, got {timeout_s}")
        if retries < 0:
            raise InputError(f"source {name!r}: retries must be at least 0, got {retries}")
        self.name = name
        self.url = retrieve_url(url)
        self.timeout_s = timeout_s
        self.retries = retries
        self.cache_params = self.url
        self._client = httpx.Client(timeout=timeout_s)

    def __repr__(self) -> str:
        return f"SearchR1Source({self.name!r}, {self.url!r})"

    def __enter__(self) -> SearchR1Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled HTTP connections."""
        self._client.close()

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        """The top-k documents for `query`, best first, tagged with this source's name."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int) -> list[list[RetrievedDoc]]:
        """Top-k documents for each query, all in one request (the server encodes them as a batch)."""
        if k < 1:
            raise InputError(f"k (passages per query) must be at least 1, got {k}")
        if not queries:
            return []
        payload = {"queries": list(queries), "topk": k, "return_scores": True}
        body = self._post(payload)
        result = body.get("result") if isinstance(body, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            got = f"{len(result)} result lists" if isinstance(result, list) else 'no "result" list'
            raise RetrievalServerError(
                f'retrieval server {self.url}: expected {{"result": [...]}} with one list per query '
                f"({len(queries)}), got {got}"
            )
        return [self._docs(hits, i)[:k] for i, hits in enumerate(result)]

    def _post(self, payload: dict[str, Any]) -> Any:
        """POST with retries on transport faults and 5xx; the decoded JSON body."""

        @retry(
            stop=stop_after_attempt(self.retries + 1),
            wait=wait_exponential(multiplier=0.2, max=4),
            retry=retry_if_exception_type((httpx.TransportError, _Retryable)),
            reraise=True,
        )
        def attempt() -> httpx.Response:
            response = self._client.post(self.url, json=payload)
            if response.status_code >= 500:
                raise _Retryable(f"HTTP {response.status_code}: {_reason(response)}")
            return response

        tries = f"after {self.retries + 1} attempt{'s' if self.retries else ''}"
        try:
            response = attempt()
        except httpx.TimeoutException as exc:
            raise RetrievalUnavailableError(
                f"retrieval server {self.url}: no answer within {self.timeout_s:g} s {tries} ({type(exc).__name__})"
            ) from None
        except httpx.TransportError as exc:
            raise RetrievalUnavailableError(
                f"retrieval server {self.url}: cannot connect {tries} ({exc or type(exc).__name__}); "
                "is it running? start one with: branchpoint retrieval serve --index DIR"
            ) from None
        except _Retryable as exc:
            raise RetrievalUnavailableError(f"retrieval server {self.url}: {exc} {tries}") from None
        if response.status_code >= 400:
            raise RetrievalServerError(
                f"retrieval server {self.url} refused the request: HTTP {response.status_code}: {_reason(response)}"
            )
        try:
            return response.json()
        except ValueError:
            raise RetrievalServerError(
                f"retrieval server {self.url}: response is not JSON: {response.text[:200]!r}"
            ) from None

    def _docs(self, hits: Any, i: int) -> list[RetrievedDoc]:
        """RetrievedDocs of one query's hits (scored `{"document", "score"}` or bare documents)."""
        where = f"retrieval server {self.url}: result[{i}]"
        if not isinstance(hits, list):
            raise RetrievalServerError(f"{where}: expected a list of hits, got {type(hits).__name__}")
        docs = []
        for j, hit in enumerate(hits):
            if not isinstance(hit, dict):
                raise RetrievalServerError(f"{where}[{j}]: expected an object, got {type(hit).__name__}")
            doc = hit.get("document", hit)
            if not isinstance(doc, dict):
                raise RetrievalServerError(f'{where}[{j}]: "document" must be an object')
            score = hit.get("score", doc.get("score", 0.0))
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise RetrievalServerError(f'{where}[{j}]: "score" must be a number, got {score!r}')
            contents = doc.get("contents")
            if isinstance(contents, str):
                title, text = split_contents(contents)
            elif isinstance(doc.get("text"), str):  # servers that split title and text themselves
                title, text = str(doc.get("title") or ""), doc["text"]
                contents = f'"{title}"\n{text}' if title else text
            else:
                raise RetrievalServerError(
                    f'{where}[{j}]: document has no "contents" string (expected {{"id", "contents"}})'
                )
            raw_id = doc.get("id")
            has_id = isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id)
            doc_id = str(raw_id) if has_id else content_id(contents)
            docs.append(
                RetrievedDoc(  # a server's texts: redacted before they are cached or stored
                    doc_id=doc_id,
                    score=float(score),
                    text=redact(text),
                    title=redact_optional(title) or None,
                    source=self.name,
                )
            )
        return docs


def _reason(response: httpx.Response) -> str:
    """The server's `{"error": ...}` (ours) or `{"detail": ...}` (FastAPI), else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    if isinstance(body, dict):
        for key in ("error", "detail"):
            if key in body:
                return str(body[key])[:500]
    return str(body)[:200]
