"""Servers a page starts and the requests it sends them: `branchpoint retrieval serve` runs in
the background as a reader runs it in a second terminal (on a free port: the page's port is
mapped to it for the page's later requests), and `curl` is sent with httpx."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

#: How long a server may take to say it serves (it loads its encoder and index first).
START_S = 90.0


@dataclass
class PageServers:
    """The page's running servers, by the port the page gives them, and their real ports."""

    root: Path
    procs: dict[int, subprocess.Popen] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)

    def serve(self, args: list[str], where: str) -> str:
        """Start `branchpoint ARGS` (a server) with `--port 0`; return its first line once it serves."""
        args = list(args)
        if "--port" in args:
            i = args.index("--port")
            page_port = int(args[i + 1])
            args[i + 1] = "0"
        else:
            page_port = 8000  # the command's default
            args += ["--port", "0"]
        self.stop(page_port)  # the reader stops the earlier server on that port first
        proc = subprocess.Popen(
            [sys.executable, "-m", "branchpoint.cli", *args, "--log-level", "warning"],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.procs[page_port] = proc
        deadline, seen = time.monotonic() + START_S, []
        while time.monotonic() < deadline:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line and proc.poll() is not None:
                break
            seen.append(line)
            m = re.search(r" at http://127\.0\.0\.1:(\d+)/", line)
            if line.startswith("serving") and m:
                self.ports[page_port] = int(m.group(1))
                return line.strip()
        self.stop(page_port)
        raise AssertionError(f"{where}: branchpoint {' '.join(args)} did not start serving:\n{''.join(seen)}")

    def refused(self, args: list[str], where: str, patience_s: float = START_S) -> str:
        """Run a server command the page shows failing; return its output once it exits (it must
        exit, not serve: a server that starts is stopped and reported)."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "branchpoint.cli", *args, "--port", "0", "--log-level", "warning"],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            output, _ = proc.communicate(timeout=patience_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            raise AssertionError(
                f"{where}: branchpoint {' '.join(args)} served instead of failing:\n{output}"
            ) from None
        if proc.returncode == 0:
            raise AssertionError(f"{where}: branchpoint {' '.join(args)} exited 0 instead of failing:\n{output}")
        return output

    def url(self, url: str) -> str:
        """`url` with a page port replaced by the port its server really listens on."""
        m = re.match(r"(https?://(?:127\.0\.0\.1|localhost)):(\d+)(.*)", url)
        if not m or int(m.group(2)) not in self.ports:
            raise AssertionError(f"{url}: no server of the page listens on that port")
        return f"{m.group(1)}:{self.ports[int(m.group(2))]}{m.group(3)}"

    def curl(self, words: list[str], shown: str, where: str) -> str:
        """Send what `curl WORDS` sends; check the answer is JSON with the keys the page shows."""
        url, headers, data, i = None, {}, None, 1
        while i < len(words):
            word = words[i]
            if word in ("-H", "--header"):
                name, _, value = words[i + 1].partition(":")
                headers[name.strip()] = value.strip()
                i += 2
            elif word in ("-d", "--data", "--data-raw"):
                data, i = words[i + 1], i + 2
            elif word.startswith("-"):
                i += 1  # -s and the like: no effect on what is sent
            else:
                url, i = word, i + 1
        if url is None:
            raise AssertionError(f"{where}: curl without a URL")
        reply = httpx.request(
            "POST" if data is not None else "GET", self.url(url), headers=headers, content=data, timeout=60
        )
        assert reply.status_code == 200, f"{where}: {url} answered {reply.status_code}: {reply.text}"
        body = reply.json()
        first = shown.splitlines()[0].lstrip("# ") if shown else ""
        if first.startswith("{") and not first.endswith("..."):
            try:
                expected = json.loads(first)
            except ValueError:
                expected = None
            if isinstance(expected, dict):
                assert set(body) == set(expected), (
                    f"{where}: {url} answered keys {sorted(body)}, the page shows {sorted(expected)}"
                )
        return reply.text

    def stop(self, page_port: int | None = None) -> None:
        """Stop the server on `page_port` (all of them when None), as Ctrl-C does."""
        for port in [page_port] if page_port is not None else list(self.procs):
            proc = self.procs.pop(port, None)
            self.ports.pop(port, None)
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
