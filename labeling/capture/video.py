"""Episode videos as LeRobot v3.0 stores them: encode, concatenate, probe, decode, image stats.

Free of Django. Mirrors huggingface/lerobot ``datasets/video_utils.py`` and
``datasets/compute_stats.py``:

* ``VideoEncoder`` streams RGB frames into an MP4 with LeRobot's encoder settings (libsvtav1,
  yuv420p, g=2, crf=30, preset 12), constant frame rate: frame k is presented at exactly k/fps.
* ``concatenate_videos`` remuxes episode videos into one chunk file without re-encoding and
  returns each episode's ``(from_timestamp, to_timestamp)`` from integer frame counts.
* ``frame_at`` looks a frame up by timestamp with LeRobot's tolerance (1e-4 s).
* ``ImageStats`` accumulates per-channel statistics in LeRobot's ``stats.json`` layout.

Odd frame sizes: libsvtav1 encodes odd widths/heights in yuv420p (AV1 rounds the chroma planes
up) and decodes them back at the same size, so they are accepted as they are. libx264 refuses
them, so ``VideoEncoder`` refuses odd sizes for libx264 with chroma-subsampled formats up front.
Frames are never padded or cropped: the video must have the shape the dataset's ``info.json``
declares.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import av
import numpy as np
import numpy.typing as npt
from av.video.reformatter import VideoReformatter
from av.video.stream import VideoStream

# Encoder -> the codec name LeRobot writes in info.json "video.codec" (the stream's canonical name).
CODECS = {"libsvtav1": "av1", "libx264": "h264"}

# LeRobot's LIBSVTAV1_DEFAULT_PRESET (SVT-AV1 4.x maps 12 to its fastest preset, 11).
SVTAV1_DEFAULT_PRESET = 12

# Enough to represent NTSC rates (30000/1001, 60000/1001) exactly from their float values.
MAX_RATE_DENOMINATOR = 1_001_000

# LeRobot's auto_downsample_height_width: frames whose larger side is at least 300 px are
# strided so that side becomes about 150 px before statistics are taken.
STATS_TARGET_SIZE = 150
STATS_DOWNSAMPLE_THRESHOLD = 300
STATS_QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}

# SVT-AV1 prints ~30 info lines to stderr per encoder; keep errors only unless the operator chose.
os.environ.setdefault("SVT_LOG", "1")

# BT.601 matrix, limited range: what swscale uses for the RGB -> yuv420p conversion anyway. Tagging
# it changes nothing for PyAV/torchcodec decoding but stops browsers assuming BT.709 for HD video.
_COLORSPACE_BT601 = 5  # AVCOL_SPC_BT470BG (== SWS_CS_ITU601)
_COLOR_RANGE_LIMITED = 1  # AVCOL_RANGE_MPEG


class VideoError(Exception):
    """A video file cannot be written or read as required; the message names the file."""


_REAL_TIME = (os.SCHED_FIFO, os.SCHED_RR)


def _real_time_threads() -> set[int]:
    """The ids of this process's threads that run under a real-time policy."""
    found = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError, ValueError):
                if os.sched_getscheduler(int(name)) in _REAL_TIME:
                    found.add(int(name))
    return found


def _ordinary_scheduling(*, keep: set[int]) -> None:
    """Put back under the ordinary scheduler every thread of this process that an encoder
    made real-time (all but ``keep``).

    SVT-AV1 run as root makes the thread that opens it and its ~40 worker threads SCHED_FIFO
    at top priority: an encoding worker would then starve the database and the web server,
    and every process it starts would inherit the policy (Chromium spun in the kernel that
    way in the test suite).
    """
    for tid in _real_time_threads() - keep:
        with contextlib.suppress(OSError):  # a thread that has ended meanwhile
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))


class VideoHung(VideoError):
    """The encoder did not finish flushing in time (SVT-AV1 3.1 and later can hang there,
    AOMediaCodec/SVT-AV1 issues 2300 and 2311): nothing is wrong with the input, so the
    work is worth doing again rather than recording as a failure."""


FLUSH_TIMEOUT_S = 120.0
"""How long flushing one video may take before the encoder counts as hung (flushing drains
the encoder's look-ahead: milliseconds for the short clips of an episode)."""


@dataclass(frozen=True)
class VideoInfo:
    """What a video file holds, probed or as written."""

    path: Path
    codec: str
    width: int
    height: int
    fps: float
    frames: int
    pix_fmt: str
    size_bytes: int
    has_audio: bool = False

    def lerobot_info(self) -> dict[str, Any]:
        """Return the ``info`` block LeRobot v3.0 writes for a video feature in info.json.

        ``video.fps`` is an int for integral rates, as LeRobot writes it; a fractional rate
        (29.97) is kept as a float rather than truncated.
        """
        fps: int | float = int(self.fps) if float(self.fps).is_integer() else self.fps
        return {
            "video.height": self.height,
            "video.width": self.width,
            "video.codec": self.codec,
            "video.pix_fmt": self.pix_fmt,
            "video.is_depth_map": False,
            "video.fps": fps,
            "video.channels": len(av.VideoFormat(self.pix_fmt).components),
            "has_audio": self.has_audio,
        }


def _rate(fps: float | Fraction, path: Path) -> Fraction:
    try:
        rate = Fraction(fps).limit_denominator(MAX_RATE_DENOMINATOR)
    except (ValueError, OverflowError, TypeError) as exc:
        raise VideoError(f"{path}: fps {fps!r} is not a finite number") from exc
    if rate <= 0:
        raise VideoError(f"{path}: fps must be positive, got {fps!r}")
    return rate


def _temp_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")


def _codec_options(
    codec: str, *, crf: int | float, g: int, preset: int | str | None, threads: int | None
) -> dict[str, str]:
    # As LeRobot's VideoEncoderConfig.get_codec_options: threads become SVT-AV1's lp
    # (level of parallelism) or x264's threads; None lets the codec use every core.
    options = {"g": str(g), "crf": str(crf)}
    if codec == "libsvtav1":
        options["preset"] = str(SVTAV1_DEFAULT_PRESET if preset is None else preset)
        if threads is not None:
            options["svtav1-params"] = f"lp={threads}"
    else:
        if preset is not None:
            options["preset"] = str(preset)
        if threads is not None:
            options["threads"] = str(threads)
    return options


class VideoEncoder:
    """Stream frames into an MP4: constant frame rate, frame k presented at exactly k/fps.

    The file is written to a temporary name beside ``path`` and renamed on ``close()``, so
    ``path`` never holds a partial video. Memory does not grow with the number of frames:
    every packet goes straight to the muxer. As a context manager it closes on success and
    aborts (removing the partial file) on an exception; ``close()`` may be called again after
    the block to get the ``VideoInfo``.

    Raises VideoError for an unknown codec, a pixel format the codec cannot encode, a size
    libx264 cannot encode, or options the encoder rejects.
    """

    def __init__(
        self,
        path: Path,
        *,
        width: int,
        height: int,
        fps: float | Fraction,
        codec: str = "libsvtav1",
        crf: int = 30,
        g: int = 2,
        preset: int | str | None = None,
        pix_fmt: str = "yuv420p",
        threads: int | None = None,
    ) -> None:
        self.path = Path(path)
        if codec not in CODECS:
            raise VideoError(f"{self.path}: codec {codec!r} is not one of {sorted(CODECS)}")
        if width <= 0 or height <= 0:
            raise VideoError(f"{self.path}: frame size {width}x{height} is not positive")
        supported = [f.name for f in av.codec.Codec(codec, "w").video_formats or ()]
        if pix_fmt not in supported:
            raise VideoError(
                f"{self.path}: {codec} cannot encode {pix_fmt!r} (supports {supported})"
            )
        fmt = av.VideoFormat(pix_fmt)
        step_x, step_y = 64 // fmt.chroma_width(64), 64 // fmt.chroma_height(64)
        if codec == "libx264" and (width % step_x or height % step_y):
            raise VideoError(
                f"{self.path}: libx264 cannot encode {width}x{height} in {pix_fmt} (needs width "
                f"a multiple of {step_x} and height of {step_y}); crop the frames or use libsvtav1"
            )
        self.width, self.height, self.codec, self.pix_fmt = width, height, codec, pix_fmt
        self._rate = _rate(fps, self.path)
        self._time_base = 1 / self._rate
        self._frames = 0
        self._packets = 0
        self._info: VideoInfo | None = None
        self._closed = False
        self._hung = False
        self._reformatter = VideoReformatter()

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._temp = _temp_beside(self.path)
        options = _codec_options(codec, crf=crf, g=g, preset=preset, threads=threads)
        try:
            self._container = av.open(
                str(self._temp), "w", format="mp4", options={"movflags": "faststart"}
            )
            stream = cast(
                VideoStream, self._container.add_stream(codec, rate=self._rate, options=options)
            )
            stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
            # Both time bases are 1/fps so frame k has pts k; the muxer then picks a timescale
            # that is a multiple of fps (15360 for 30 fps, 30000 for 30000/1001): still exact.
            stream.time_base = self._time_base
            context = stream.codec_context
            context.time_base = self._time_base
            context.colorspace = _COLORSPACE_BT601
            context.color_range = _COLOR_RANGE_LIMITED
            self._stream = stream
            # Opens the encoder and writes the header now, so bad options fail here.
            real_time = _real_time_threads()
            self._container.start_encoding()
            _ordinary_scheduling(keep=real_time)
        except av.FFmpegError as exc:
            self._discard()
            raise VideoError(f"{self.path}: cannot start {codec} encoder {options}: {exc}") from exc

    @property
    def frames(self) -> int:
        """Frames written so far."""
        return self._frames

    def write(self, rgb: npt.NDArray[np.uint8]) -> None:
        """Encode one HxWx3 uint8 RGB frame; it is presented at frames/fps.

        Raises VideoError if the frame has the wrong shape or dtype, the encoder is closed, or
        the encoder fails.
        """
        if self._closed:
            raise VideoError(f"{self.path}: encoder is already closed")
        shape = getattr(rgb, "shape", None)
        dtype = getattr(rgb, "dtype", None)
        if shape != (self.height, self.width, 3) or dtype != np.uint8:
            raise VideoError(
                f"{self.path}: frame {self._frames} is {shape} {dtype}, expected "
                f"({self.height}, {self.width}, 3) uint8 RGB"
            )
        if rgb.strides[1:] != (3, 1):
            rgb = np.ascontiguousarray(rgb)  # the only copy, and only for strided views
        # from_numpy_buffer wraps the caller's buffer; the colour conversion writes the yuv frame.
        try:
            frame = self._reformatter.reformat(
                av.VideoFrame.from_numpy_buffer(rgb, format="rgb24"),
                format=self.pix_fmt,
                dst_colorspace=_COLORSPACE_BT601,
                dst_color_range=_COLOR_RANGE_LIMITED,
            )
            frame.pts = self._frames
            frame.time_base = self._time_base
            self._mux(self._stream.encode(frame))
        except av.FFmpegError as exc:
            raise VideoError(
                f"{self.path}: {self.codec} failed on frame {self._frames}: {exc}"
            ) from exc
        self._frames += 1

    def _mux(self, packets: list[av.Packet]) -> None:
        for packet in packets:
            packet.duration = 1  # one frame at 1/fps: gives the last frame its duration too
            self._container.mux(packet)
            self._packets += 1

    def close(self) -> VideoInfo:
        """Flush the encoder and move the finished file to ``path``; return what it holds.

        Calling it again returns the same VideoInfo. Raises VideoError (and removes the partial
        file) if no frame was written or the encoder fails while flushing.
        """
        if self._info is not None:
            return self._info
        if self._closed:
            raise VideoError(f"{self.path}: encoder was aborted")
        if self._frames == 0:
            self.abort()
            raise VideoError(f"{self.path}: no frames were written")
        try:
            self._mux(self._flush())
            self._container.close()
        except VideoHung:
            # The encoder's threads are stuck inside the codec: leave its context alone
            # (closing it would wait on them too) and give up on this file.
            self._closed = self._hung = True
            self._temp.unlink(missing_ok=True)
            raise
        except av.FFmpegError as exc:
            self.abort()
            raise VideoError(f"{self.path}: {self.codec} failed while flushing: {exc}") from exc
        self._closed = True
        if self._packets != self._frames:
            self._temp.unlink(missing_ok=True)
            raise VideoError(
                f"{self.path}: encoder produced {self._packets} packets for {self._frames} frames"
            )
        os.replace(self._temp, self.path)
        self._info = VideoInfo(
            path=self.path,
            codec=CODECS[self.codec],
            width=self.width,
            height=self.height,
            fps=float(self._rate),
            frames=self._frames,
            pix_fmt=self.pix_fmt,
            size_bytes=self.path.stat().st_size,
        )
        return self._info

    def _flush(self) -> list[av.Packet]:
        """Drain the encoder, giving up after :data:`FLUSH_TIMEOUT_S` (raises VideoHung).

        The flush runs in a helper thread (PyAV releases the GIL inside the codec) so a hung
        codec cannot hang the caller; a helper stuck for good is a daemon thread.
        """
        outcome: dict[str, Any] = {}

        def drain() -> None:
            try:
                outcome["packets"] = self._stream.encode(None)
            except BaseException as exc:  # handed to the caller below
                outcome["error"] = exc

        helper = threading.Thread(target=drain, name=f"flush {self.path.name}", daemon=True)
        helper.start()
        helper.join(FLUSH_TIMEOUT_S)
        if helper.is_alive():
            raise VideoHung(
                f"{self.path}: {self.codec} did not finish flushing within "
                f"{FLUSH_TIMEOUT_S:.0f} s (a known encoder hang); convert it again"
            )
        if "error" in outcome:
            raise outcome["error"]
        return cast(list[av.Packet], outcome["packets"])

    def abort(self) -> None:
        """Stop encoding and remove the partial file; ``path`` is left as it was."""
        if self._info is not None or self._hung:
            return
        self._closed = True
        self._discard()

    def _discard(self) -> None:
        container = getattr(self, "_container", None)
        if container is not None:
            with contextlib.suppress(Exception):
                container.close()
        self._temp.unlink(missing_ok=True)

    def __enter__(self) -> VideoEncoder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


@contextlib.contextmanager
def _open_video(path: Path) -> Iterator[tuple[Any, Any]]:
    """Open ``path`` and yield (container, first video stream); VideoError if unreadable."""
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise VideoError(f"{path}: cannot open video: {exc}") from exc
    try:
        if not container.streams.video:
            raise VideoError(f"{path}: has no video stream")
        yield container, container.streams.video[0]
    except av.FFmpegError as exc:
        raise VideoError(f"{path}: cannot read video: {exc}") from exc
    finally:
        container.close()


@dataclass(frozen=True)
class _Probe:
    codec: str
    width: int
    height: int
    rate: Fraction
    pix_fmt: str
    extradata: bytes


def _probe(path: Path, stream: Any) -> _Probe:
    context = stream.codec_context
    rate = stream.base_rate or stream.average_rate
    if not rate:
        raise VideoError(f"{path}: frame rate is unknown")
    return _Probe(
        codec=context.codec.canonical_name,
        width=int(context.width),
        height=int(context.height),
        rate=Fraction(rate),
        pix_fmt=str(context.pix_fmt),
        extradata=bytes(context.extradata or b""),
    )


def video_info(path: Path) -> VideoInfo:
    """Probe a video file, counting its frames exactly by demuxing every packet.

    Raises VideoError if the file cannot be read or has no video stream.
    """
    path = Path(path)
    with _open_video(path) as (container, stream):
        probe = _probe(path, stream)
        has_audio = bool(container.streams.audio)
        frames = sum(1 for packet in container.demux(stream) if packet.size)
    return VideoInfo(
        path=path,
        codec=probe.codec,
        width=probe.width,
        height=probe.height,
        fps=float(probe.rate),
        frames=frames,
        pix_fmt=probe.pix_fmt,
        size_bytes=path.stat().st_size,
        has_audio=has_audio,
    )


def _frame_index(value: int, time_base: Fraction, rate: Fraction, path: Path) -> int:
    exact = value * time_base * rate
    index = round(exact)
    if abs(exact - index) > Fraction(1, 4):  # snaps millisecond time bases, rejects VFR
        raise VideoError(f"{path}: timestamp {float(value * time_base):.6f} s is not on a frame")
    return index


def concatenate_videos(inputs: Sequence[Path], output: Path) -> list[tuple[float, float]]:
    """Remux episode videos into one file without re-encoding; return each one's time range.

    Input i spans ``[frame_offset_i / fps, (frame_offset_i + frames_i) / fps)`` in the output,
    computed from integer frame counts so nothing drifts however many episodes a file holds
    (LeRobot issue #3177). Packet timestamps are rewritten so output frame k is presented at
    exactly k/fps. Only the video stream is copied. ``output`` may be one of the inputs; it
    is replaced atomically.

    Raises VideoError naming the file when there are no inputs, an input is unreadable, is not
    constant frame rate (an input starting late is moved to 0), or differs from the first in
    codec, size, fps, pixel format or codec parameters (e.g. x264 encoded at another crf).
    """
    output = Path(output)
    if not inputs:
        raise VideoError(f"{output}: no input videos to concatenate")
    output.parent.mkdir(parents=True, exist_ok=True)
    temp = _temp_beside(output)
    try:
        sink = av.open(str(temp), "w", format="mp4", options={"movflags": "faststart"})
    except (av.FFmpegError, OSError) as exc:
        raise VideoError(f"{output}: cannot create {temp.name}: {exc}") from exc
    try:
        ranges = _concatenate_into(sink, [Path(p) for p in inputs], output)
        sink.close()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            sink.close()
        temp.unlink(missing_ok=True)
        if isinstance(exc, av.FFmpegError):
            raise VideoError(f"{output}: cannot write concatenated video: {exc}") from exc
        raise
    os.replace(temp, output)
    return ranges


def _concatenate_into(sink: Any, inputs: list[Path], output: Path) -> list[tuple[float, float]]:
    ranges: list[tuple[float, float]] = []
    target: Any = None
    reference: _Probe | None = None
    offset = 0
    for source in inputs:
        with _open_video(source) as (container, stream):
            probe = _probe(source, stream)
            if reference is None:
                reference = probe
                target = sink.add_stream_from_template(template=stream, opaque=True)
                target.time_base = 1 / probe.rate
            else:
                _check_same(source, probe, reference, inputs[0])
            count = _remux(source, container, stream, sink, target, reference.rate, offset, output)
        rate = reference.rate
        ranges.append((float(offset / rate), float((offset + count) / rate)))
        offset += count
    return ranges


def _check_same(path: Path, probe: _Probe, reference: _Probe, first: Path) -> None:
    for name in ("codec", "width", "height", "rate", "pix_fmt"):
        mine, theirs = getattr(probe, name), getattr(reference, name)
        if mine != theirs:
            label = "fps" if name == "rate" else name
            raise VideoError(f"{path}: {label} {mine} differs from {theirs} of {first}")
    if probe.extradata != reference.extradata:
        raise VideoError(
            f"{path}: {probe.codec} parameters differ from {first} (encoded with other settings); "
            "re-encode it with the same settings before concatenating"
        )


def _remux(
    path: Path,
    container: Any,
    stream: Any,
    sink: Any,
    target: Any,
    rate: Fraction,
    offset: int,
    output: Path,
) -> int:
    """Copy one input's packets to ``target`` shifted by ``offset`` frames; return its frame count."""
    time_base = Fraction(stream.time_base)
    out_time_base = 1 / rate
    start = stream.start_time or 0  # a file whose first frame is not at 0 is moved to 0
    seen: set[int] = set()
    for packet in container.demux(stream):
        if packet.dts is None or not packet.size:
            continue  # demuxer flush packet
        if packet.pts is None:
            raise VideoError(f"{path}: packet without a presentation time")
        index = _frame_index(packet.pts - start, time_base, rate, path)
        dts = _frame_index(packet.dts - start, time_base, rate, path)
        if index in seen:
            raise VideoError(f"{path}: two frames at {float(index / rate):.6f} s")
        seen.add(index)
        packet.pts, packet.dts = offset + index, offset + dts
        packet.time_base, packet.duration = out_time_base, 1
        packet.stream = target
        try:
            sink.mux(packet)
        except av.FFmpegError as exc:
            raise VideoError(f"{output}: cannot write packet from {path}: {exc}") from exc
    count = len(seen)
    if count == 0:
        raise VideoError(f"{path}: has no frames")
    if min(seen) != 0 or max(seen) != count - 1:
        raise VideoError(
            f"{path}: frames span {float(min(seen) / rate):.6f}-{float(max(seen) / rate):.6f} s, "
            f"not 0 to {(count - 1)}/fps: not constant frame rate from 0"
        )
    return count


def decode_video(path: Path) -> Iterator[tuple[float, npt.NDArray[np.uint8]]]:
    """Yield (presentation time in s, HxWx3 uint8 RGB) for every frame, in order.

    Raises VideoError if the file cannot be read.
    """
    path = Path(path)
    with _open_video(path) as (container, stream):
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            yield float(frame.pts * frame.time_base), frame.to_ndarray(format="rgb24")


def frame_at(path: Path, timestamp: float, tolerance_s: float = 1e-4) -> npt.NDArray[np.uint8]:
    """Return the frame presented within ``tolerance_s`` of ``timestamp`` as HxWx3 uint8 RGB.

    The lookup LeRobot's pyav backend does: seek to the keyframe before, decode forward to the
    first frame at or after ``timestamp``, take the nearer of it and its predecessor. Raises
    VideoError saying the nearest frame's time if none is within tolerance.
    """
    path = Path(path)
    with _open_video(path) as (container, stream):
        time_base = Fraction(stream.time_base)
        container.seek(
            max(0, round(timestamp / time_base) - 1), backward=True, any_frame=False, stream=stream
        )
        best: Any = None
        best_time = float("nan")
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            current = float(frame.pts * time_base)
            if best is None or abs(current - timestamp) < abs(best_time - timestamp):
                best, best_time = frame, current
            if current >= timestamp:
                break
        if best is None:
            raise VideoError(f"{path}: no frame decoded at or before {timestamp:.6f} s")
        if abs(best_time - timestamp) > tolerance_s:
            raise VideoError(
                f"{path}: no frame within {tolerance_s} s of {timestamp:.6f} s; "
                f"the nearest is at {best_time:.6f} s"
            )
        return best.to_ndarray(format="rgb24")


class ImageStats:
    """Per-channel statistics of a camera's frames, as LeRobot stores them.

    Values are in [0, 1] and shaped (3, 1, 1) as nested lists; ``count`` is ``[frames added]``.
    Every ``sample_every``-th frame (from the first) is strided down as LeRobot's
    ``auto_downsample_height_width`` does and counted into exact 256-bin histograms per channel,
    so memory is constant and min, max, mean and std are exact over the sampled pixels.
    Quantiles are the smallest value whose cumulative share reaches q, which is what LeRobot's
    5000-bin histogram estimates for 8-bit data.
    """

    def __init__(self, *, sample_every: int = 1) -> None:
        if sample_every < 1:
            raise ValueError(f"sample_every must be at least 1, got {sample_every}")
        self.sample_every = sample_every
        self.frames = 0
        self._histograms = np.zeros((3, 256), dtype=np.int64)

    def add(self, rgb: npt.NDArray[np.uint8]) -> None:
        """Count one HxWx3 uint8 RGB frame; raises ValueError for anything else."""
        shape = getattr(rgb, "shape", None)
        if shape is None or len(shape) != 3 or shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(
                f"expected an HxWx3 uint8 RGB frame, got {shape} {getattr(rgb, 'dtype', None)}"
            )
        self.frames += 1
        if (self.frames - 1) % self.sample_every:
            return
        height, width = shape[0], shape[1]
        if max(height, width) >= STATS_DOWNSAMPLE_THRESHOLD:
            step = max(width, height) // STATS_TARGET_SIZE
            rgb = rgb[::step, ::step]
        for channel in range(3):
            self._histograms[channel] += np.bincount(rgb[..., channel].ravel(), minlength=256)

    def result(self) -> dict[str, list[Any]]:
        """Return min, max, mean, std, count and q01..q99 as LeRobot's stats.json holds them.

        Raises ValueError if no frame was added.
        """
        if self.frames == 0:
            raise ValueError("no frames were added")
        histograms = self._histograms
        pixels = histograms.sum(axis=1)
        levels = np.arange(256, dtype=np.float64)
        mean = histograms @ levels / pixels
        variance = histograms @ (levels**2) / pixels - mean**2
        nonzero = histograms > 0
        values: dict[str, npt.NDArray[np.float64]] = {
            "min": nonzero.argmax(axis=1).astype(np.float64),
            "max": (255 - nonzero[:, ::-1].argmax(axis=1)).astype(np.float64),
            "mean": mean,
            "std": np.sqrt(np.maximum(variance, 0.0)),
        }
        cumulative = np.cumsum(histograms, axis=1)
        for key, q in STATS_QUANTILES.items():
            values[key] = np.array(
                [np.searchsorted(cumulative[c], q * pixels[c]) for c in range(3)], dtype=np.float64
            )
        result: dict[str, list[Any]] = {
            key: [[[float(v) / 255.0]] for v in array] for key, array in values.items()
        }
        result["count"] = [self.frames]
        return {
            key: result[key] for key in ("min", "max", "mean", "std", "count", *STATS_QUANTILES)
        }
