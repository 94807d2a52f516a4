"""tools/fieldcraft_upload.py against a live server: chunks, resuming, each content once,
refusals and --watch.

The uploader runs in this process where the test needs to reach into it (a lost answer), and
as a subprocess without site-packages (``python -S``: the standard library only, no Django)
where it must be killed or interrupted.
"""

from __future__ import annotations

import hashlib
import json
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from rest_framework.authtoken.models import Token

from campaigns.models import TaskRecording
from labeling.capture.synthetic import CameraPlan, RecordingPlan, write_recording
from labeling.models import Recording, RecordingUpload
from tools import fieldcraft_upload as fu

# The live server must see the test's rows: committed, not in a rolled-back transaction.
live = pytest.mark.django_db(transaction=True)

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "fieldcraft_upload.py"
CHUNK_MB = "0.01"  # 10,485 bytes: a two-second recording goes up in about eight chunks


def write_mcap(path: Path, *, seed: int = 0) -> Path:
    plan = RecordingPlan(
        duration_s=2.0,
        joints=("j1", "gripper"),
        cameras=[CameraPlan("front", width=96, height=64)],
        state_hz=50,
        action_hz=50,
        seed=seed,
    )
    write_recording(path, plan)
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ServerSpy:
    """The requests the live server received; it can hold the n-th PUT until released."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, str | None]] = []
        self.in_flight = 0
        self.hold_put: int | None = None
        self.held = threading.Event()
        self.release = threading.Event()

    def started(self, sender: Any, environ: dict[str, Any], **kwargs: Any) -> None:
        with self.lock:
            entry = (environ["REQUEST_METHOD"], environ["PATH_INFO"])
            self.seen.append((*entry, environ.get("HTTP_CONTENT_RANGE")))
            self.in_flight += 1
            hold = self.hold_put is not None and len(self.puts()) == self.hold_put
        if hold and entry[0] == "PUT":
            self.held.set()
            self.release.wait(30)

    def finished(self, sender: Any, **kwargs: Any) -> None:
        with self.lock:
            self.in_flight -= 1

    def puts(self, since: int = 0) -> list[int]:
        """The first byte of each PUT, in order."""
        return [
            int(re.match(r"bytes (\d+)-", rng or "bytes 0-").group(1))
            for method, _, rng in self.seen[since:]
            if method == "PUT"
        ]

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


@pytest.fixture
def spy() -> Any:
    spy = ServerSpy()
    request_started.connect(spy.started, weak=False)
    request_finished.connect(spy.finished, weak=False)
    yield spy
    spy.release.set()
    request_started.disconnect(spy.started)
    request_finished.disconnect(spy.finished)


@pytest.fixture
def rig(world_a: Any, live_server: Any, tmp_path: Path) -> Any:
    """A field member's token for world A's collection task, and the uploader's arguments."""
    token = Token.objects.create(user=world_a.field).key
    args = [
        "--server",
        live_server.url,
        "--token",
        token,
        "--task",
        str(world_a.collection_task.pk),
        "--state",
        str(tmp_path / "state.json"),
        "--backoff",
        "0.01",
    ]
    return world_a, args, tmp_path


def run(capsys: Any, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """Run the uploader in this process with --json; its exit status, events and stderr."""
    code = fu.main([*args, "--json"])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in events]


def script(*args: str) -> list[str]:
    return [sys.executable, "-S", str(SCRIPT), *args]


@live
def test_a_recording_goes_up_in_chunks_and_is_stored_once_with_the_same_content(rig, spy, capsys):
    world, args, tmp = rig
    path = write_mcap(tmp / "run_1.mcap")

    code = fu.main([*args, "--chunk-mb", CHUNK_MB, "--kind", "calibration", str(path)])

    out, err = capsys.readouterr()
    assert code == 0, err
    recording = Recording.objects.get(organization=world.operator, sha256=sha256_of(path))
    assert sha256_of(Path(recording.storage_path)) == sha256_of(path)
    assert recording.is_calibration
    assert TaskRecording.objects.filter(
        task=world.collection_task, recording=recording, kind="calibration"
    ).exists()
    starts = spy.puts()
    assert len(starts) >= 3
    assert starts == sorted(set(starts))  # no chunk sent twice
    assert re.search(r"^run_1\.mcap: 0\.\d\d / 0\.\d\d MB \(\d+%\)$", out, re.M)
    assert fu._progress(12 * fu.MB, 48 * fu.MB) == "12.0 / 48.0 MB (25%)"
    assert f"run_1.mcap: stored as recording {recording.pk} (status: " in out
    assert "done: 1 uploaded, 0 already stored, 0 refused" in out


@live
def test_the_same_file_twice_is_stored_once_and_the_state_file_spares_the_server(rig, spy, capsys):
    world, args, tmp = rig
    path = write_mcap(tmp / "take.mcap")
    copy = tmp / "copy" / "take-again.mcap"
    copy.parent.mkdir()
    shutil.copy(path, copy)

    first, _, _ = run(capsys, *args, str(path))
    before_second = spy.count()
    second, second_events, _ = run(capsys, *args, "--no-state", str(path))
    before_third = spy.count()
    third, third_events, _ = run(capsys, *args, str(copy))

    assert (first, second, third) == (0, 0, 0)
    recording = Recording.objects.get(organization=world.operator, sha256=sha256_of(path))
    assert ("already_stored", "server") in [(e["event"], e.get("source")) for e in second_events]
    assert spy.puts(before_second) == []
    stored = next(e for e in third_events if e["event"] == "already_stored")
    assert (stored["source"], stored["recording"]) == ("state", recording.pk)
    assert spy.count() == before_third  # known content: not one request


@live
def test_a_killed_uploader_resumes_from_the_servers_offset(rig, spy):
    world, args, tmp = rig
    path = write_mcap(tmp / "long.mcap")
    spy.hold_put = 2  # the second chunk waits at the server until the uploader is dead
    first = subprocess.Popen(
        script(*args, "--chunk-mb", CHUNK_MB, "--json", str(path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert spy.held.wait(20), first.stderr.read().decode() if first.poll() else "no 2nd PUT"
        assert RecordingUpload.objects.get(sha256=sha256_of(path)).received > 0
    finally:
        first.kill()
        first.communicate()
    spy.release.set()
    deadline = time.monotonic() + 10
    while spy.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    server_offset = RecordingUpload.objects.get(sha256=sha256_of(path)).received
    mark = spy.count()

    second = subprocess.run(
        script(*args, "--chunk-mb", CHUNK_MB, "--json", str(path)),
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert second.returncode == 0, second.stderr
    events = [json.loads(line) for line in second.stdout.splitlines()]
    assert 0 < server_offset < path.stat().st_size
    assert spy.puts(mark)[0] == server_offset
    assert next(e for e in events if e["event"] == "start")["offset"] == server_offset
    assert "stored" in kinds(events)
    recording = Recording.objects.get(organization=world.operator, sha256=sha256_of(path))
    assert sha256_of(Path(recording.storage_path)) == sha256_of(path)


@live
def test_a_lost_answer_and_a_5xx_are_retried_from_the_servers_offset(rig, spy, capsys, monkeypatch):
    world, args, tmp = rig
    path = write_mcap(tmp / "flaky.mcap")
    real_send = fu.Client.send
    puts = []

    def flaky_send(self, method, url, **kwargs):
        if method == "PUT":
            puts.append(url)
            if len(puts) == 2:  # the server stores the chunk; its answer is lost
                real_send(self, method, url, **kwargs)
                raise fu.NetworkError("Connection reset by peer")
            if len(puts) == 4:
                return fu.Reply(503, {"detail": "busy"})
        return real_send(self, method, url, **kwargs)

    monkeypatch.setattr(fu.Client, "send", flaky_send)

    code, events, err = run(capsys, *args, "--chunk-mb", CHUNK_MB, str(path))

    assert code == 0, err
    assert [e["error"] for e in events if e["event"] == "retry"] == [
        "Connection reset by peer",
        "HTTP 503: busy",
    ]
    assert "resume" not in kinds(events)  # it asked for the offset: no 409
    assert len([m for m, _, _ in spy.seen if m == "GET"]) == 2
    starts = spy.puts()
    assert starts == sorted(set(starts))
    recording = Recording.objects.get(organization=world.operator, sha256=sha256_of(path))
    assert sha256_of(Path(recording.storage_path)) == sha256_of(path)


@live
def test_a_non_mcap_file_a_bad_token_and_another_organizations_task_are_refused(
    rig, world_b, capsys
):
    world, args, tmp = rig
    notes = tmp / "notes.txt"
    notes.write_text("not a recording")
    path = write_mcap(tmp / "ok.mcap")
    other_task = [*args, "--task", str(world_b.collection_task.pk)]
    bad_token = [*args, "--token", "0" * 40]

    not_mcap = fu.main([*args, str(notes)])
    not_mcap_err = capsys.readouterr().err
    wrong_token = fu.main([*bad_token, str(path)])
    wrong_token_err = capsys.readouterr().err
    other = subprocess.run(script(*other_task, str(path)), capture_output=True, text=True)

    assert not_mcap == 1
    assert "notes.txt: refused: filename: expected an .mcap recording, got 'notes.txt'" in (
        not_mcap_err
    )
    assert wrong_token == 1
    assert "does not accept this token (Invalid token.)" in wrong_token_err
    assert other.returncode == 1
    assert f"task {world_b.collection_task.pk}: not found" in other.stderr
    assert "Traceback" not in other.stderr
    assert not Recording.objects.filter(sha256=sha256_of(path)).exists()


def test_usage_errors_exit_2_without_a_traceback(tmp_path, capsys):
    args = ["--server", "http://127.0.0.1:9", "--token", "t", "--task", "1", "--no-state"]

    missing = fu.main([*args, str(tmp_path / "nowhere.mcap")])
    missing_err = capsys.readouterr().err
    too_big = fu.main([*args, "--chunk-mb", "20", str(tmp_path)])
    no_server = fu.main(["--server", "fieldcraft.example", "--token", "t", "--task", "1", "x"])
    nothing = fu.main(args)

    assert (missing, too_big, no_server, nothing) == (2, 2, 2, 2)
    assert "nowhere.mcap: no such file or folder" in missing_err


@live
def test_watch_uploads_a_file_once_it_has_settled_and_is_closed(rig, spy, tmp_path):
    world, args, tmp = rig
    folder = tmp / "incoming"
    folder.mkdir()
    full = write_mcap(tmp / "source.mcap", seed=3).read_bytes()
    settle = 0.6
    watcher = subprocess.Popen(
        script(
            *args, "--json", "--watch", str(folder), "--interval", "0.1", "--settle", str(settle)
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[dict[str, Any]] = queue.Queue()
    events: list[dict[str, Any]] = []

    def read() -> None:
        for line in watcher.stdout:
            events.append(json.loads(line))
            lines.put(events[-1])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait_for(kind: str, timeout: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if event["event"] == kind:
                return event
        watcher.kill()
        raise AssertionError(f"no {kind!r} event; stderr: {watcher.communicate()[1]}")

    try:
        wait_for("watching")
        target = folder / "episode_7.mcap"
        target.write_bytes(full[: len(full) // 2])  # the recorder is still writing
        waiting = wait_for("waiting")
        with target.open("ab") as fh:
            fh.write(full[len(full) // 2 :])
        finished_at = time.monotonic()
        stored = wait_for("stored")
        settled_for = time.monotonic() - finished_at
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=10)
        reader.join(timeout=5)
    err = watcher.stderr.read()

    assert waiting["name"] == "episode_7.mcap"
    assert settled_for >= settle
    recording = Recording.objects.get(id=stored["recording"])
    assert recording.sha256 == hashlib.sha256(full).hexdigest()
    assert RecordingUpload.objects.filter(sha256=recording.sha256).count() == 1
    assert watcher.returncode == 0, err
    assert events[-1] == {
        "event": "summary",
        "uploaded": 1,
        "already_stored": 0,
        "refused": 0,
        "unreachable": 0,
    }
