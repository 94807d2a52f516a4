"""Which recorded streams are a robot's state, action and cameras.

An embodiment may name each topic; a blank topic is found by convention among what the
recording carries:

* **state** — a ``sensor_msgs/msg/JointState`` topic named like ``joint_states``;
* **action** — a joint topic whose name has ``command`` or ``action`` as a word
  (``/joint_commands``, ``/arm/action``); with ``action_source="next_state"`` no action stream
  is read and a frame's action is the state one frame later;
* **camera** — an image topic whose name contains the camera's name (the busiest one).

Joint values are put in the embodiment's action-dimension order by the names the messages
carry, never by their position in the message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

ACTION_SOURCES = ("stream", "next_state")
GAP_POLICIES = ("split", "mark", "exclude")

_STATE_TOPIC = re.compile(r"joint_states?")
_ACTION_TOPIC = re.compile(r"(^|[/_.\-])(commands?|actions?)($|[/_.\-])")
_JOINT_STATE_SCHEMAS = {"sensor_msgs/msg/JointState", "sensor_msgs/JointState"}


class StreamMappingError(ValueError):
    """A required stream is not in the recording (or the mapping itself is invalid)."""


def video_key(camera_name: str) -> str:
    """The LeRobot feature key of a camera: ``observation.images.<name>`` in snake case."""
    slug = re.sub(r"[^0-9a-zA-Z]+", "_", camera_name.strip()).strip("_").lower()
    return f"observation.images.{slug or 'camera'}"


@dataclass(frozen=True)
class CameraMapping:
    name: str
    topic: str = ""
    clock_offset_ms: float = 0.0
    fps: float | None = None
    width: int | None = None
    height: int | None = None

    @property
    def key(self) -> str:
        return video_key(self.name)


@dataclass(frozen=True)
class StreamMap:
    """What to read from a recording of one embodiment, and how to put it on one clock."""

    joints: tuple[str, ...]
    cameras: tuple[CameraMapping, ...] = ()
    state_topic: str = ""
    action_topic: str = ""
    action_source: str = "stream"
    fps: float | None = None
    gap_policy: str = "split"
    # A piece of an episode split at a gap shorter than this is dropped (and reported).
    min_segment_s: float = 0.5
    slug: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.joints:
            raise StreamMappingError("the embodiment declares no action dimensions (joints)")
        if len(set(self.joints)) != len(self.joints):
            raise StreamMappingError("the embodiment declares a joint twice")
        if self.action_source not in ACTION_SOURCES:
            raise StreamMappingError(
                f"action_source must be one of {', '.join(ACTION_SOURCES)}, got {self.action_source!r}"
            )
        if self.gap_policy not in GAP_POLICIES:
            raise StreamMappingError(
                f"gap_policy must be one of {', '.join(GAP_POLICIES)}, got {self.gap_policy!r}"
            )
        if self.fps is not None and not self.fps > 0:
            raise StreamMappingError(f"fps must be positive, got {self.fps!r}")
        keys = [c.key for c in self.cameras]
        if len(set(keys)) != len(keys):
            raise StreamMappingError(f"two cameras share the dataset key: {', '.join(keys)}")

    @classmethod
    def from_embodiment(cls, embodiment: Mapping[str, Any]) -> StreamMap:
        """Build the map from a plain embodiment dict (as ``CaptureSpec.from_embodiment``):
        ``action_dimensions`` (ordered, with ``name``), ``cameras`` (``name``, ``topic``,
        ``clock_offset_ms``, ``fps``, ``width``, ``height``), ``state_topic``, ``action_topic``,
        ``action_source``, ``dataset_fps``, ``gap_policy``."""
        joints = tuple(str(d["name"]) for d in embodiment.get("action_dimensions") or [])
        cameras = tuple(
            CameraMapping(
                name=str(c["name"]),
                topic=str(c.get("topic") or ""),
                clock_offset_ms=float(c.get("clock_offset_ms") or 0.0),
                fps=float(c["fps"]) if c.get("fps") else None,
                width=int(c["width"]) if c.get("width") else None,
                height=int(c["height"]) if c.get("height") else None,
            )
            for c in embodiment.get("cameras") or []
        )
        fps = embodiment.get("dataset_fps")
        return cls(
            joints=joints,
            cameras=cameras,
            state_topic=str(embodiment.get("state_topic") or ""),
            action_topic=str(embodiment.get("action_topic") or ""),
            action_source=str(embodiment.get("action_source") or "stream"),
            fps=float(fps) if fps else None,
            gap_policy=str(embodiment.get("gap_policy") or "split"),
            slug=str(embodiment.get("slug") or ""),
        )

    def with_options(
        self,
        *,
        fps: float | None = None,
        clock_offsets_ms: Mapping[str, float] | None = None,
        gap_policy: str | None = None,
    ) -> StreamMap:
        """A copy with the dataset fps, per-camera clock offsets or gap policy overridden.

        Raises StreamMappingError naming a camera the embodiment does not have.
        """
        cameras = self.cameras
        if clock_offsets_ms:
            names = {c.name for c in cameras}
            unknown = sorted(set(clock_offsets_ms) - names)
            if unknown:
                raise StreamMappingError(
                    f"clock offset for unknown camera {', '.join(unknown)} "
                    f"(cameras: {', '.join(sorted(names)) or 'none'})"
                )
            cameras = tuple(
                replace(c, clock_offset_ms=float(clock_offsets_ms[c.name]))
                if c.name in clock_offsets_ms
                else c
                for c in cameras
            )
        return replace(
            self,
            cameras=cameras,
            fps=fps if fps is not None else self.fps,
            gap_policy=gap_policy or self.gap_policy,
        )


@dataclass(frozen=True)
class TopicSummary:
    """One topic the recording carries, as the resolver sees it."""

    topic: str
    schema_name: str
    count: int
    is_image: bool
    is_joint: bool


@dataclass(frozen=True)
class Resolved:
    state: str
    action: str | None
    cameras: dict[str, str]  # camera name -> topic


def _carries(topics: Sequence[TopicSummary]) -> str:
    if not topics:
        return "it carries no topics"
    listed = ", ".join(
        f"{t.topic} ({t.schema_name or 'no schema'}, {t.count:,} messages)"
        for t in sorted(topics, key=lambda t: t.topic)
    )
    return f"it carries {listed}"


def _busiest(candidates: list[TopicSummary]) -> TopicSummary | None:
    if not candidates:
        return None
    return max(candidates, key=lambda t: (t.count, -len(t.topic)))


def _declared(
    topic: str, what: str, by_topic: dict[str, TopicSummary], topics: Sequence[TopicSummary]
) -> TopicSummary:
    found = by_topic.get(topic)
    if found is None:
        raise StreamMappingError(
            f"the recording has no {what} stream {topic} (declared on the embodiment); "
            + _carries(topics)
        )
    if found.count == 0:
        raise StreamMappingError(f"the {what} stream {topic} holds no messages")
    return found


def resolve(stream_map: StreamMap, topics: Sequence[TopicSummary]) -> Resolved:
    """Find the state, action and camera topics of ``stream_map`` among ``topics``.

    Raises StreamMappingError naming the missing stream and listing what the recording carries.
    """
    by_topic = {t.topic: t for t in topics}
    if stream_map.state_topic:
        state = _declared(stream_map.state_topic, "state", by_topic, topics)
    else:
        found = _busiest(
            [
                t
                for t in topics
                if t.count
                and t.schema_name in _JOINT_STATE_SCHEMAS
                and _STATE_TOPIC.search(t.topic.lower())
            ]
        )
        if found is None:
            raise StreamMappingError(
                "the recording has no state stream (a sensor_msgs/msg/JointState topic named "
                "like joint_states; or name it on the embodiment); " + _carries(topics)
            )
        state = found
    action: TopicSummary | None = None
    if stream_map.action_source == "stream":
        if stream_map.action_topic:
            action = _declared(stream_map.action_topic, "action", by_topic, topics)
        else:
            action = _busiest(
                [
                    t
                    for t in topics
                    if t.count
                    and t.is_joint
                    and t.topic != state.topic
                    and _ACTION_TOPIC.search(t.topic.lower())
                ]
            )
            if action is None:
                raise StreamMappingError(
                    "the recording has no action stream (a joint topic named like command or "
                    "action; name it on the embodiment, or set its action source to 'next "
                    "state'); " + _carries(topics)
                )
    cameras: dict[str, str] = {}
    for camera in stream_map.cameras:
        if camera.topic:
            found = _declared(camera.topic, f"camera {camera.name!r}", by_topic, topics)
        else:
            needle = camera.name.lower()
            match = _busiest([t for t in topics if t.is_image and needle in t.topic.lower()])
            if match is None or match.count == 0:
                raise StreamMappingError(
                    f"the recording has no stream for camera {camera.name!r} (an image topic "
                    f"containing {camera.name!r}; or name it on the camera); " + _carries(topics)
                )
            found = match
        cameras[camera.name] = found.topic
    taken: dict[str, str] = {}
    for name, topic in cameras.items():
        if topic in taken:
            raise StreamMappingError(
                f"cameras {taken[topic]!r} and {name!r} both map to {topic}; name their topics"
            )
        taken[topic] = name
    return Resolved(state=state.topic, action=action.topic if action else None, cameras=cameras)
