"""Memory-mapped FlashRAG jsonl corpora: an offset index over the file, fingerprinted once.

Opening a corpus by reading every row into Python objects costs about 0.8 s and 28 MB per 20k
passages, so Wikipedia (21M passages) would take minutes and tens of GB in every process that
opens it (each `--processes` or Ray worker). A `MappedCorpus` instead reads one pass over the
file once, writes a sidecar (`<file>.bpoffsets.npy`: the byte span of every row, and
`<file>.bpoffsets.json`: file size, mtime, row count, corpus fingerprint), and from then on
opens in milliseconds: a row is read (`os.pread` of its span, found by one `pread` in the
offsets file) and parsed only when it is asked for. Nothing is mapped into the process: the OS
page cache, shared by every process on the machine, holds what was read, so a worker's
resident memory does not grow with the corpus. (An mmap would work too, but each random access
maps the kernel's read-ahead window into the process: about 170 KB of RSS per passage served.)

The sidecar is written beside the corpus when its folder is writable, else under
`$BRANCHPOINT_CACHE/corpora/` (keyed by the file's absolute path). It is trusted only while the
file's size and modification time are those it recorded; otherwise it is rebuilt. The
fingerprint equals `corpus_fingerprint(load_corpus(path))`, so manifests written from lists
and from mapped corpora agree.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from branchpoint.errors import InputError
from branchpoint.retrieval.corpus import Passage, fingerprint_row, load_corpus, passage_from_row
from branchpoint.traces import MAX_LINE_BYTES, TraceError, parse_json_line

SIDECAR_VERSION = 1
SIDECAR_SUFFIX = ".bpoffsets"


def _cache_root() -> Path:
    root = os.environ.get("BRANCHPOINT_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "branchpoint"
    return base / "corpora"


def sidecar_paths(path: Path) -> tuple[Path, Path]:
    """(offsets .npy, meta .json) for a corpus file: beside it if that folder is writable, else the cache."""
    folder = path.parent
    if not os.access(folder, os.W_OK):
        key = hashlib.sha256(str(path.resolve()).encode("utf-8")).hexdigest()[:16]
        folder = _cache_root() / key
    stem = path.name + SIDECAR_SUFFIX
    return folder / f"{stem}.npy", folder / f"{stem}.json"


class _Spans:
    """Row spans (start, stop) read on demand from the offsets .npy file (or held, if given)."""

    def __init__(self, source: Path | np.ndarray) -> None:
        if isinstance(source, np.ndarray):
            self._array: np.ndarray | None = source
            self.rows = int(source.shape[0])
            self._fd = -1
            return
        self._array = None
        with source.open("rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(fh)
            self._offset = fh.tell()
        if len(shape) != 2 or shape[1] != 2 or dtype != np.dtype("<i8"):
            raise ValueError(f"{source}: not a row-span array")
        self.rows = int(shape[0])
        self._fd = os.open(source, os.O_RDONLY)

    def __getitem__(self, i: int) -> tuple[int, int]:
        if self._array is not None:
            return int(self._array[i, 0]), int(self._array[i, 1])
        start, stop = np.frombuffer(os.pread(self._fd, 16, self._offset + 16 * i), dtype="<i8")
        return int(start), int(stop)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class MappedCorpus(Sequence[Passage]):
    """The passages of a FlashRAG jsonl file, read on demand; row i is the i-th non-blank line."""

    def __init__(self, path: Path, spans: Path | np.ndarray, fingerprint: str) -> None:
        """Wrap a file and its row spans: the offsets file, or an array (use `open_mapped_corpus`)."""
        self.path = path
        self.fingerprint = fingerprint
        self._spans = _Spans(spans)
        self._fd = os.open(path, os.O_RDONLY)

    def __repr__(self) -> str:
        return f"MappedCorpus({str(self.path)!r}, {len(self)} passages)"

    def __len__(self) -> int:
        return self._spans.rows

    @overload
    def __getitem__(self, i: int) -> Passage: ...

    @overload
    def __getitem__(self, i: slice) -> list[Passage]: ...

    def __getitem__(self, i: int | slice) -> Passage | list[Passage]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"passage {i} out of range (corpus of {n})")
        start, stop = self._spans[i]
        obj = json.loads(os.pread(self._fd, stop - start, start))
        return passage_from_row(obj, f"{self.path} row {i}")

    def __iter__(self) -> Iterator[Passage]:
        for i in range(len(self)):
            yield self[i]

    def close(self) -> None:
        """Close the corpus and offsets files."""
        self._spans.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except (OSError, AttributeError):
            pass


def _stat_key(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"version": SIDECAR_VERSION, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _read_sidecar(path: Path) -> tuple[Path, str] | None:
    """(offsets file, fingerprint) of a sidecar that matches the file as it is now, else None."""
    offsets_file, meta_file = sidecar_paths(path)
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        spans = _Spans(offsets_file)
    except (OSError, ValueError):
        return None
    spans.close()
    key = _stat_key(path)
    if any(meta.get(k) != v for k, v in key.items()):
        return None
    if spans.rows != meta.get("rows") or not isinstance(meta.get("fingerprint"), str):
        return None
    return offsets_file, meta["fingerprint"]


def _scan(path: Path) -> tuple[np.ndarray, str]:
    """One pass over the file: every row's byte span, validated; the corpus fingerprint."""
    starts, stops = array("q"), array("q")
    id_hashes = array("Q")
    digest = hashlib.sha256()
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            line_start, offset = offset, offset + len(raw)
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"{path} line {lineno}: longer than {MAX_LINE_BYTES} bytes")
            try:
                obj = parse_json_line(raw, path, lineno)
            except TraceError as exc:
                raise InputError(str(exc)) from None
            if obj is None:
                continue
            passage = passage_from_row(obj, f"{path} line {lineno}")
            digest.update(fingerprint_row(passage))
            id_hashes.append(
                int.from_bytes(hashlib.blake2b(passage.doc_id.encode("utf-8"), digest_size=8).digest(), "little")
            )
            starts.append(line_start)
            stops.append(offset)
    if not starts:
        raise InputError(f"{path}: corpus is empty (no passages found)")
    hashes = np.sort(np.frombuffer(id_hashes, dtype=np.uint64))
    if np.any(hashes[1:] == hashes[:-1]):
        load_corpus(path, fmt="flashrag-jsonl")  # names the duplicate id and both lines
        raise InputError(f"{path}: duplicate ids (ids must be unique)")  # a hash collision
    spans = np.stack([np.frombuffer(starts, dtype=np.int64), np.frombuffer(stops, dtype=np.int64)], axis=1)
    return spans, digest.hexdigest()


def _write_sidecar(path: Path, spans: np.ndarray, fingerprint: str, key: dict[str, Any]) -> None:
    offsets_file, meta_file = sidecar_paths(path)
    offsets_file.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp_npy = offsets_file.with_name(f".{offsets_file.name}.{tag}.tmp.npy")
    tmp_json = meta_file.with_name(f".{meta_file.name}.{tag}.tmp")
    try:
        np.save(tmp_npy, spans, allow_pickle=False)
        meta = {**key, "rows": int(spans.shape[0]), "fingerprint": fingerprint, "corpus": str(path)}
        tmp_json.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp_npy, offsets_file)
        os.replace(tmp_json, meta_file)  # the meta last: a sidecar is trusted only once whole
    finally:
        for tmp in (tmp_npy, tmp_json):
            if tmp.exists():
                tmp.unlink()


def open_mapped_corpus(path: str | Path) -> MappedCorpus:
    """The corpus at `path` (FlashRAG jsonl) memory-mapped; its offset sidecar built on first use."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: corpus file not found")
    found = _read_sidecar(path)
    if found is None:
        key = _stat_key(path)
        spans, fingerprint = _scan(path)
        if _stat_key(path) != key:
            raise InputError(f"{path}: the file changed while it was being indexed; try again")
        try:
            _write_sidecar(path, spans, fingerprint, key)
        except OSError:  # read-only everywhere: keep the spans in memory for this process
            return MappedCorpus(path, spans, fingerprint)
        found = _read_sidecar(path)
        if found is None:
            return MappedCorpus(path, spans, fingerprint)
    return MappedCorpus(path, *found)


def is_jsonl_corpus(path: str | Path, fmt: str = "auto") -> bool:
    """Whether `path` is read as FlashRAG jsonl (and so can be memory-mapped)."""
    return fmt == "flashrag-jsonl" or (fmt == "auto" and Path(path).suffix == ".jsonl")


def open_corpus(path: str | Path, fmt: str = "auto") -> Sequence[Passage]:
    """A jsonl corpus memory-mapped, any other format read whole (`load_corpus`)."""
    if is_jsonl_corpus(path, fmt):
        return open_mapped_corpus(path)
    return load_corpus(path, fmt)


def fingerprint_of(passages: Sequence[Passage]) -> str:
    """The corpus fingerprint: recorded for a MappedCorpus, computed for a list."""
    if isinstance(passages, MappedCorpus):
        return passages.fingerprint
    from branchpoint.retrieval.corpus import corpus_fingerprint

    return corpus_fingerprint(passages)
