#!/usr/bin/env python3
"""Upload robot recordings (.mcap) to Fieldcraft from the robot's computer.

    python tools/fieldcraft_upload.py --server https://host --token TOKEN --task ID \\
        [--kind episode|calibration] FILE_OR_FOLDER [...]
    python tools/fieldcraft_upload.py ... --watch FOLDER [--interval 5] [--settle 10]

It speaks the upload API in ``campaigns/recording_apis.py``. Each file's SHA-256 is declared before
a byte is sent, so the server answers "already stored" for content it holds, and hands back the
unfinished upload of the same content so a killed uploader, started again, resumes where the
server's copy ends. Chunks go up with a Content-Range; after a network error or a 5xx the
uploader backs off exponentially (capped, ``--retries``), asks the server for its offset and
carries on from there; a 409 names the offset to resume from. A local state file remembers
which content each server and task holds (and the hashes of files already read), so a second
run neither sends nor re-reads them.

``--watch`` polls a folder and uploads a file once its size and modification time have not
changed for ``--settle`` seconds and it ends with the MCAP footer (a recorder still writing
it, or paused between chunks, is left alone). Ctrl-C (or SIGTERM) prints a summary; an
unfinished upload resumes on the next start.

Exit status: 0 every file uploaded or already stored; 1 a file (or the task, or the token) was
refused, with the server's reason; 2 a usage error; 3 the server could not be reached after
the retries (run again later to resume); 130 interrupted outside ``--watch``.

Standard library only, no Django: copy this one file onto the robot. The token can come from
the FIELDCRAFT_TOKEN environment variable instead of ``--token`` (kept out of ``ps``).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import random
import re
import signal
import ssl
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

MB = 1024 * 1024
MCAP_MAGIC = b"\x89MCAP0\r\n"
MAX_CHUNK_MB = 16  # the protocol's limit per chunk (labeling.recording_services.MAX_CHUNK_BYTES)
BACKOFF_CAP_S = 60.0
MAX_CONFLICTS = 5  # 409s in a row without progress before the upload is given up
MAX_HASHES = 5000  # remembered file hashes; the oldest are forgotten first
USER_AGENT = "fieldcraft-upload/1"

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """The command line asks for something impossible."""


class Refused(Exception):
    """The server (or the file) said no; ``fatal`` when every other file would be refused too."""

    def __init__(self, detail: str, *, status: int | None = None, fatal: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.fatal = fatal


class Unreachable(Exception):
    """The retries ran out: the server could not be reached, or kept failing."""


class NetworkError(Exception):
    """No answer: the connection failed, timed out or broke."""


class UploadGone(Exception):
    """The server does not know the upload (404 on one of its chunks)."""


# --- HTTP -------------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: Any
    headers: Any = None

    @property
    def detail(self) -> str:
        return describe_body(self.body, self.status)


def describe_body(body: Any, status: int) -> str:
    """The server's message: DRF's ``detail``, or its field errors on one line."""
    if isinstance(body, dict):
        if isinstance(body.get("detail"), str):
            return body["detail"]
        parts = []
        for key, value in body.items():
            text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            parts.append(f"{key}: {text}")
        if parts:
            return "; ".join(parts)
    if isinstance(body, list) and body:
        return "; ".join(map(str, body))
    return f"HTTP {status}"


def _parse(data: bytes) -> Any:
    if not data:
        return None
    text = data.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return {"detail": " ".join(text.split())[:300]}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect reaches the caller as its 3xx: urllib would turn a redirected POST into a GET."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Client:
    """Requests to one Fieldcraft server with a token; every answer comes back as a Reply."""

    def __init__(self, server: str, token: str, *, timeout: float = 60.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirect)

    def send(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """Send one request; raise NetworkError when no answer arrives."""
        request = urllib.request.Request(  # noqa: S310 (the scheme is checked: http or https)
            self.server + path,
            data=body,
            method=method,
            headers={
                "Authorization": f"Token {self.token}",
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
                **(headers or {}),
            },
        )
        try:
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    return Reply(response.status, _parse(response.read()), response.headers)
            except urllib.error.HTTPError as exc:
                with exc:
                    return Reply(exc.code, _parse(exc.read()), exc.headers)
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLCertVerificationError):
                raise Refused(
                    f"{self.server}: its TLS certificate is not trusted ({exc.reason.verify_message})",
                    fatal=True,
                ) from exc
            raise NetworkError(_describe_exc(exc.reason)) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise NetworkError(_describe_exc(exc)) from exc


def _describe_exc(exc: Any) -> str:
    text = str(exc)
    return text if text and text != "None" else type(exc).__name__


# --- local state ------------------------------------------------------------------------------


class State:
    """Content each server and task already holds (sha256 → recording), and file hashes.

    One JSON file, rewritten atomically (a temporary file renamed over it) after each change,
    merged with what is on disk first so two uploaders sharing it lose nothing. ``path`` None
    keeps it in memory only.
    """

    def __init__(self, path: Path | None, *, warn: Callable[[str], None]) -> None:
        self.path = path
        self.warn = warn
        self._write_failed = False
        self.data = self._read(quiet=False)

    @staticmethod
    def _empty() -> dict[str, Any]:
        return {"version": 1, "done": {}, "hashes": {}}

    def _read(self, *, quiet: bool) -> dict[str, Any]:
        if self.path is None:
            return self._empty()
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return self._empty()
        except (OSError, ValueError) as exc:
            if not quiet:
                self.warn(f"state file {self.path}: unreadable ({exc}); starting afresh")
            return self._empty()
        if not (
            isinstance(raw, dict)
            and isinstance(raw.get("done"), dict)
            and isinstance(raw.get("hashes"), dict)
        ):
            if not quiet:
                self.warn(f"state file {self.path}: not a state file; starting afresh")
            return self._empty()
        return raw

    def done(self, key: str, sha256: str) -> dict[str, Any] | None:
        entry = self.data["done"].get(key, {}).get(sha256)
        return entry if isinstance(entry, dict) else None

    def mark_done(self, key: str, sha256: str, *, recording: Any, name: str) -> None:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.data["done"].setdefault(key, {})[sha256] = {
            "recording": recording,
            "name": name,
            "at": at,
        }
        self.save()

    def cached_hash(self, path: Path, st: os.stat_result) -> str | None:
        entry = self.data["hashes"].get(str(path))
        if (
            isinstance(entry, dict)
            and entry.get("size") == st.st_size
            and entry.get("mtime_ns") == st.st_mtime_ns
        ):
            return entry.get("sha256")
        return None

    def remember_hash(self, path: Path, st: os.stat_result, sha256: str) -> None:
        hashes = self.data["hashes"]
        hashes.pop(str(path), None)  # to the end: the newest are kept
        hashes[str(path)] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        disk = self._read(quiet=True)
        for key, entries in self.data["done"].items():
            disk["done"].setdefault(key, {}).update(entries)
        hashes = {**disk["hashes"], **self.data["hashes"]}
        disk["hashes"] = dict(list(hashes.items())[-MAX_HASHES:])
        self.data = disk
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(
                dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
            )
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(disk, fh, indent=1)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            if not self._write_failed:
                self.warn(f"state file {self.path}: cannot write ({exc}); carrying on without it")
            self._write_failed = True


# --- output -----------------------------------------------------------------------------------


def _mb(n: int, *, of: int | None = None) -> str:
    """Megabytes, with a second decimal for files under one (``of``: the file's size)."""
    return f"{n / MB:.{1 if (of if of is not None else n) >= MB else 2}f}"


def _progress(sent: int, size: int) -> str:
    return f"{_mb(sent, of=size)} / {_mb(size)} MB ({100 * sent // max(size, 1)}%)"


class Reporter:
    """Events as lines for people, or (``json_lines``) one JSON object per line."""

    def __init__(
        self, *, json_lines: bool = False, out: IO[str] | None = None, err: IO[str] | None = None
    ) -> None:
        self.json_lines = json_lines
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def event(self, kind: str, **fields: Any) -> None:
        if self.json_lines:
            print(json.dumps({"event": kind, **fields}), file=self.out, flush=True)
            return
        line = self._human(kind, fields)
        if line is not None:
            stream = self.err if kind in ("refused", "unreachable", "warning") else self.out
            print(line, file=stream, flush=True)

    def warn(self, message: str) -> None:
        self.event("warning", message=message)

    @staticmethod
    def _human(kind: str, f: dict[str, Any]) -> str | None:
        name = f.get("name", "")
        if kind == "start":
            if f["offset"]:
                return f"{name}: resuming at {_progress(f['offset'], f['size'])}"
            return f"{name}: uploading {_mb(f['size'])} MB"
        if kind == "progress":
            return f"{name}: {_progress(f['sent'], f['size'])}"
        if kind == "resume":
            return f"{name}: the server has {_progress(f['offset'], f['size'])}; resuming there"
        if kind == "retry":
            return (
                f"{name}: {f['error']}; retry {f['attempt']}/{f['retries']} in {f['delay']:.1f} s"
            )
        if kind == "chunk_size":
            return f"{name}: the server takes at most {_mb(f['limit'])} MB a chunk; sending smaller chunks"
        if kind == "stored":
            status = f"status: {f['status']}"
            reasons = [
                f"{c.get('name')}: {c.get('message')}"
                for c in f.get("failed_checks") or []
                if isinstance(c, dict)
            ]
            if not reasons and f["status"] in ("failed", "unreadable") and f.get("message"):
                reasons = [f["message"].splitlines()[0]]
            if reasons:
                status += " — " + "; ".join(reasons)
            return f"{name}: stored as recording {f['recording']} ({status})"
        if kind == "already_stored":
            how = "; known from the state file" if f["source"] == "state" else ""
            return f"{name}: already stored (recording {f['recording']}{how})"
        if kind == "refused":
            return f"{name or 'fieldcraft-upload'}: refused: {f['detail']}"
        if kind == "unreachable":
            return f"{name}: not uploaded: {f['detail']}; run again to resume"
        if kind == "waiting":
            return (
                f"{name}: unchanged for {f['settle']:g} s but not closed (no MCAP footer yet); "
                "waiting for the recorder to finish it"
            )
        if kind == "empty":
            return f"{f['folder']}: no .mcap files"
        if kind == "watching":
            return (
                f"watching {f['folder']} for .mcap files (every {f['interval']:g} s, "
                f"settled after {f['settle']:g} s); Ctrl-C to stop"
            )
        if kind == "interrupted":
            return "interrupted: run again to resume"
        if kind == "summary":
            text = (
                f"done: {f['uploaded']} uploaded, {f['already_stored']} already stored, "
                f"{f['refused']} refused"
            )
            if f["unreachable"]:
                text += f", {f['unreachable']} not reached (run again to resume)"
            return text
        if kind == "warning":
            return f"warning: {f['message']}"
        return None  # "hashed" and other detail is for --json readers


# --- files ------------------------------------------------------------------------------------


def natural_key(text: str) -> list[Any]:
    """Sort key putting ``run_2`` before ``run_10``."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def mcap_files(folder: Path, *, recursive: bool = False) -> list[Path]:
    """The folder's ``.mcap`` files (not hidden ones), in natural order."""
    try:
        candidates = list(folder.glob("**/*" if recursive else "*"))
    except OSError:
        return []
    found = [
        p
        for p in candidates
        if p.suffix.lower() == ".mcap" and not p.name.startswith(".") and p.is_file()
    ]
    return sorted(found, key=lambda p: natural_key(str(p.relative_to(folder))))


def has_mcap_footer(path: Path) -> bool:
    """Whether the file ends with the MCAP magic a writer puts last when it closes the file."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() < 2 * len(MCAP_MAGIC):
                return False
            fh.seek(-len(MCAP_MAGIC), os.SEEK_END)
            return fh.read(len(MCAP_MAGIC)) == MCAP_MAGIC
    except OSError:
        return False


# --- uploading --------------------------------------------------------------------------------


@dataclass
class Options:
    task: int
    kind: str = "episode"
    chunk_bytes: int = 8 * MB
    retries: int = 8
    backoff: float = 1.0


@dataclass
class Backoff:
    """Consecutive failures of one file's upload: wait longer after each, give up after ``retries``."""

    retries: int
    base: float
    on_retry: Callable[..., None]
    sleep: Callable[[float], None]
    failures: int = 0

    def reset(self) -> None:
        self.failures = 0

    def failed(self, error: str, *, retry_after: float | None = None) -> None:
        """Count a failure and wait before the next attempt; raise Unreachable past ``retries``."""
        self.failures += 1
        if self.failures > self.retries:
            raise Unreachable(f"{error} (gave up after {self.failures} attempts)")
        delay = min(BACKOFF_CAP_S, self.base * 2 ** (self.failures - 1))
        delay *= random.uniform(0.8, 1.0)  # uploaders cut off together do not return together
        if retry_after is not None:
            delay = min(BACKOFF_CAP_S, max(delay, retry_after))
        self.on_retry(
            attempt=self.failures, retries=self.retries, delay=round(delay, 3), error=error
        )
        self.sleep(delay)


def _retry_after(reply: Reply) -> float | None:
    try:
        return float(reply.headers.get("Retry-After"))
    except (AttributeError, TypeError, ValueError):
        return None


def _transient(reply: Reply) -> bool:
    return reply.status >= 500 or reply.status == 429


@dataclass
class _Watched:
    signature: tuple[int, int]
    since: float
    handled: tuple[int, int] | None = None
    told_waiting: bool = False


@dataclass
class Uploader:
    """Uploads files to one collection task, each content once; counts the outcomes."""

    client: Client
    options: Options
    state: State
    report: Reporter
    sleep: Callable[[float], None] = time.sleep
    counts: Counter = field(default_factory=Counter)

    @property
    def key(self) -> str:
        return f"{self.client.server} task {self.options.task}"

    def exit_code(self) -> int:
        if self.counts["refused"]:
            return EXIT_REFUSED
        if self.counts["unreachable"]:
            return EXIT_UNREACHABLE
        return EXIT_OK

    def summary(self) -> None:
        self.report.event(
            "summary",
            **{k: self.counts[k] for k in ("uploaded", "already_stored", "refused", "unreachable")},
        )

    def upload(self, path: Path) -> str:
        """Upload one file; return uploaded, already_stored, refused or unreachable.

        Raises Refused when the refusal is fatal (the token or the task): every other file
        would be refused the same way.
        """
        where = {"file": str(path), "name": path.name}
        try:
            return self._upload(path, where)
        except Refused as exc:
            self._outcome("refused", "refused", **where, status=exc.status, detail=exc.detail)
            if exc.fatal:
                raise
            return "refused"
        except Unreachable as exc:
            return self._outcome("unreachable", "unreachable", **where, detail=str(exc))

    def _outcome(self, outcome: str, event: str, **fields: Any) -> str:
        """Count the outcome, then say it (an interrupt after the line must not lose the count)."""
        self.counts[outcome] += 1
        self.report.event(event, **fields)
        return outcome

    def _upload(self, path: Path, where: dict[str, str]) -> str:
        try:
            sha256, size = self._digest(path)
        except OSError as exc:
            raise Refused(f"cannot read {path}: {exc.strerror or exc}") from exc
        self.report.event("hashed", **where, sha256=sha256, size=size)
        known = self.state.done(self.key, sha256)
        if known is not None:
            return self._outcome(
                "already_stored",
                "already_stored",
                **where,
                recording=known.get("recording"),
                source="state",
            )
        backoff = Backoff(
            retries=self.options.retries,
            base=self.options.backoff,
            on_retry=lambda **kw: self.report.event("retry", **where, **kw),
            sleep=self.sleep,
        )
        sent = False  # once chunks went up, a stored answer is this run's upload
        restarts = 0
        while True:
            started = self._start(path, sha256=sha256, size=size, backoff=backoff)
            recording = started.get("recording")
            if recording is None:
                try:
                    sent = True
                    recording = self._chunks(
                        path,
                        where,
                        upload_id=started["id"],
                        offset=started["offset"],
                        size=size,
                        backoff=backoff,
                    )
                except UploadGone as exc:
                    restarts += 1
                    if restarts > 1:
                        raise Refused(str(exc), status=404) from exc
                    continue
                if recording is None:  # complete, but the answer was lost: ask again
                    restarts += 1
                    if restarts > 2:
                        raise Refused("the server has every byte but names no recording")
                    continue
            self.state.mark_done(self.key, sha256, recording=recording.get("id"), name=path.name)
            if sent:
                return self._outcome(
                    "uploaded",
                    "stored",
                    **where,
                    recording=recording.get("id"),
                    status=recording.get("status"),
                    message=recording.get("message") or "",
                    failed_checks=recording.get("failed_checks") or [],
                )
            return self._outcome(
                "already_stored",
                "already_stored",
                **where,
                recording=recording.get("id"),
                source="server",
            )

    def _digest(self, path: Path) -> tuple[str, int]:
        """The file's SHA-256 (read a block at a time, or remembered from an earlier run)."""
        before = path.stat()
        cached = self.state.cached_hash(path, before)
        if cached:
            return cached, before.st_size
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(MB), b""):
                digest.update(block)
        after = path.stat()
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise Refused("the file changed while it was read; upload it once it is finished")
        self.state.remember_hash(path, before, digest.hexdigest())
        return digest.hexdigest(), before.st_size

    def _call(self, backoff: Backoff, method: str, path: str, **kwargs: Any) -> Reply:
        """One request, retried while the network fails or the server answers 5xx/429."""
        while True:
            try:
                reply = self.client.send(method, path, **kwargs)
            except NetworkError as exc:
                backoff.failed(str(exc))
                continue
            if _transient(reply):
                backoff.failed(
                    f"HTTP {reply.status}: {reply.detail}", retry_after=_retry_after(reply)
                )
                continue
            backoff.reset()
            return reply

    def _start(self, path: Path, *, sha256: str, size: int, backoff: Backoff) -> dict[str, Any]:
        """POST the file's description: ``{recording}`` when stored, else ``{id, offset}``."""
        task = self.options.task
        payload = {"filename": path.name, "size": size, "sha256": sha256, "kind": self.options.kind}
        reply = self._call(
            backoff,
            "POST",
            f"/api/collection-tasks/{task}/recordings/",
            body=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
        )
        body = reply.body if isinstance(reply.body, dict) else {}
        if reply.status == 200 and isinstance(body.get("recording"), dict):
            return {"recording": body["recording"]}
        if reply.status == 201 and isinstance(body.get("id"), (int, str)) and body["id"] != "":
            try:
                return {"id": body["id"], "offset": int(body["offset"])}
            except (KeyError, TypeError, ValueError):
                pass
        raise self._refusal(reply, what=f"task {task}")

    def _refusal(self, reply: Reply, *, what: str) -> Refused:
        status, detail = reply.status, reply.detail
        if 300 <= status < 400:
            location = (reply.headers or {}).get("Location", "?")
            return Refused(
                f"the server redirected to {location}; pass that address as --server",
                status=status,
                fatal=True,
            )
        # DRF answers a bad token with 403 when session authentication comes first.
        if status == 401 or (status == 403 and re.search(r"token|credentials", detail, re.I)):
            return Refused(
                f"the server does not accept this token ({detail}); a manager makes one with "
                "`python manage.py drf_create_token USERNAME` or in the admin",
                status=status,
                fatal=True,
            )
        if status == 403:
            return Refused(
                f"{what}: this token's user may not upload recordings ({detail}); it takes a "
                "manager or a field member of the task's organization",
                status=status,
                fatal=True,
            )
        if status == 404 and what.startswith("task"):
            return Refused(
                f"{what}: not found ({detail}); is it a collection task of this token's "
                "organization, and is the task id right?",
                status=status,
                fatal=True,
            )
        if 200 <= status < 300:
            return Refused(f"{what}: unexpected answer (HTTP {status}: {detail})", status=status)
        return Refused(f"{detail} (HTTP {status})", status=status)

    def _chunks(
        self,
        path: Path,
        where: dict[str, str],
        *,
        upload_id: Any,
        offset: int,
        size: int,
        backoff: Backoff,
    ) -> dict[str, Any] | None:
        """PUT the file from ``offset`` on; the stored recording, or None when the server has
        every byte but its answer was lost (ask for the recording again)."""
        url = f"/api/recording-uploads/{upload_id}/"
        self.report.event("start", **where, upload=upload_id, offset=offset, size=size)
        conflicts = 0
        with path.open("rb") as fh:
            while offset < size:
                length = min(self.options.chunk_bytes, size - offset)
                fh.seek(offset)
                data = fh.read(length)
                if len(data) != length:
                    raise Refused(f"the file is now shorter than {size:,} bytes; upload it again")
                headers = {
                    "Content-Type": "application/octet-stream",
                    "Content-Range": f"bytes {offset}-{offset + length - 1}/{size}",
                }
                try:
                    reply = self.client.send("PUT", url, body=data, headers=headers)
                except NetworkError as exc:
                    error = str(exc)
                else:
                    body = reply.body if isinstance(reply.body, dict) else {}
                    if reply.status == 201 and isinstance(body.get("recording"), dict):
                        return body["recording"]
                    if reply.status in (200, 409) and isinstance(body.get("offset"), int):
                        backoff.reset()
                        if reply.status == 200:
                            conflicts = 0
                            offset = body["offset"]
                            self.report.event("progress", **where, sent=offset, size=size)
                            continue
                        conflicts += 1
                        if conflicts > MAX_CONFLICTS:
                            raise Refused(
                                f"upload {upload_id}: the server keeps moving the offset "
                                f"({reply.detail}); is another uploader sending this file?"
                            )
                        offset = body["offset"]
                        self.report.event("resume", **where, offset=offset, size=size)
                        continue
                    limit = body.get("limit")
                    if reply.status == 413 and isinstance(limit, int) and 0 < limit < length:
                        self.options.chunk_bytes = limit
                        self.report.event("chunk_size", **where, limit=limit)
                        continue
                    if reply.status == 404:
                        raise UploadGone(
                            f"upload {upload_id}: not found ({reply.detail}); another user may "
                            "have started sending the same content"
                        )
                    if not _transient(reply):
                        raise self._refusal(reply, what=f"upload {upload_id}")
                    error = f"HTTP {reply.status}: {reply.detail}"
                resumed = self._resume_offset(url, backoff, error)
                if resumed is None:
                    return None
                offset = resumed
        return None

    def _resume_offset(self, url: str, backoff: Backoff, error: str) -> int | None:
        """After a failed chunk: wait, then ask where the server's copy ends (None: complete)."""
        while True:
            backoff.failed(error)
            try:
                reply = self.client.send("GET", url)
            except NetworkError as exc:
                error = str(exc)
                continue
            if _transient(reply):
                error = f"HTTP {reply.status}: {reply.detail}"
                continue
            body = reply.body if isinstance(reply.body, dict) else {}
            if reply.status == 200 and isinstance(body.get("offset"), int):
                return None if body.get("recording") else body["offset"]
            if reply.status == 404:
                raise UploadGone(f"{url}: not found ({reply.detail})")
            raise self._refusal(reply, what=url)

    def watch(
        self,
        folder: Path,
        *,
        interval: float,
        settle: float,
        recursive: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Poll ``folder`` and upload each settled, closed .mcap file; runs until interrupted."""
        self.report.event("watching", folder=str(folder), interval=interval, settle=settle)
        seen: dict[Path, _Watched] = {}
        while True:
            now = clock()
            present = set()
            for path in mcap_files(folder, recursive=recursive):
                present.add(path)
                try:
                    st = path.stat()
                except OSError:
                    continue
                signature = (st.st_size, st.st_mtime_ns)
                entry = seen.get(path)
                if entry is None or entry.signature != signature:
                    seen[path] = _Watched(signature=signature, since=now)
                    continue
                if entry.handled == signature or now - entry.since < settle or not st.st_size:
                    continue
                if not has_mcap_footer(path):
                    if not entry.told_waiting:
                        self.report.event("waiting", file=str(path), name=path.name, settle=settle)
                        entry.told_waiting = True
                    continue
                if self.upload(path) != "unreachable":  # unreachable: try again next round
                    entry.handled = signature
            for gone in set(seen) - present:
                del seen[gone]
            self.sleep(interval)


# --- command line -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fieldcraft_upload.py",
        description="Upload .mcap recordings to a Fieldcraft collection task: resumable, "
        "checksummed, each content once.",
        epilog="Exit status: 0 all uploaded or already stored, 1 refused, 2 usage error, "
        "3 server unreachable (run again to resume).",
    )
    parser.add_argument(
        "paths", nargs="*", metavar="FILE_OR_FOLDER", help=".mcap files or folders of them"
    )
    parser.add_argument(
        "--server", required=True, help="the Fieldcraft address, e.g. https://fieldcraft.example"
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("FIELDCRAFT_TOKEN"),
        help="API token (default: $FIELDCRAFT_TOKEN)",
    )
    parser.add_argument("--task", required=True, type=int, help="collection task id")
    parser.add_argument("--kind", choices=("episode", "calibration"), default="episode")
    parser.add_argument(
        "--chunk-mb", type=float, default=8.0, help="chunk size in MB (default 8, at most 16)"
    )
    parser.add_argument(
        "--retries", type=int, default=8, help="retries after consecutive failures (default 8)"
    )
    parser.add_argument(
        "--backoff",
        type=float,
        default=1.0,
        help="first retry delay in seconds, doubled each time up to 60 (default 1)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds without an answer before a request counts as failed",
    )
    parser.add_argument(
        "--state",
        default="~/.fieldcraft-upload.json",
        help="state file (default ~/.fieldcraft-upload.json)",
    )
    parser.add_argument("--no-state", action="store_true", help="keep no state file")
    parser.add_argument(
        "--recursive", action="store_true", help="look in subfolders too (rosbag2 folders)"
    )
    parser.add_argument(
        "--watch",
        metavar="FOLDER",
        help="keep uploading new .mcap files from FOLDER until interrupted",
    )
    parser.add_argument(
        "--interval", type=float, default=5.0, help="--watch: seconds between looks (default 5)"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="--watch: seconds a file must stay unchanged (default 10)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per event line")
    return parser


def _checked(args: argparse.Namespace, report: Reporter) -> tuple[str, list[Path]]:
    """The server address and the files to upload; raise UsageError."""
    server = args.server.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", server):
        raise UsageError(f"--server: expected an http:// or https:// address, got {args.server!r}")
    if not (args.token or "").strip():
        raise UsageError("--token (or FIELDCRAFT_TOKEN): the API token is required")
    if args.task < 1:
        raise UsageError(f"--task: expected a collection task id, got {args.task}")
    if not 0 < args.chunk_mb <= MAX_CHUNK_MB:
        raise UsageError(f"--chunk-mb: expected more than 0 and at most {MAX_CHUNK_MB}")
    if args.retries < 0 or args.backoff < 0 or args.timeout <= 0:
        raise UsageError("--retries and --backoff cannot be negative, --timeout must be positive")
    if args.interval <= 0 or args.settle < 0:
        raise UsageError("--interval must be positive and --settle not negative")
    if not args.paths and not args.watch:
        raise UsageError("name .mcap files or folders to upload, or --watch FOLDER")
    if args.watch and not Path(args.watch).expanduser().is_dir():
        raise UsageError(f"--watch {args.watch}: not a folder")
    files: list[Path] = []
    for arg in args.paths:
        path = Path(arg).expanduser()
        if path.is_dir():
            found = mcap_files(path, recursive=args.recursive)
            if not found:
                report.event("empty", folder=str(path))
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise UsageError(f"{arg}: no such file or folder")
    unique = list({p.resolve(): None for p in files})
    return server, unique


def _interrupt_on_sigterm() -> Any:
    """A service manager's stop ends the run like Ctrl-C (summary, resumable); return the
    handler it replaced (None off the main thread, where signals cannot be handled)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the uploader; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    report = Reporter(json_lines=args.json)
    try:
        server, files = _checked(args, report)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    state_path = None if args.no_state else Path(args.state).expanduser()
    uploader = Uploader(
        client=Client(server, args.token.strip(), timeout=args.timeout),
        options=Options(
            task=args.task,
            kind=args.kind,
            chunk_bytes=max(1, int(args.chunk_mb * MB)),
            retries=args.retries,
            backoff=args.backoff,
        ),
        state=State(state_path, warn=report.warn),
        report=report,
    )
    previous = _interrupt_on_sigterm()
    try:
        for path in files:
            uploader.upload(path)
        if args.watch:
            uploader.watch(
                Path(args.watch).expanduser().resolve(),
                interval=args.interval,
                settle=args.settle,
                recursive=args.recursive,
            )
    except Refused:
        uploader.summary()
        return EXIT_REFUSED
    except KeyboardInterrupt:
        if args.watch:
            uploader.summary()
            return EXIT_OK
        report.event("interrupted")
        uploader.summary()
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    uploader.summary()
    return uploader.exit_code()


if __name__ == "__main__":
    sys.exit(main())
