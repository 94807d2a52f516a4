"""The fleet's ingest API: production events in batches of up to 10,000.

Protocol:
    POST /api/production/events/
        Content-Type: application/x-ndjson or application/jsonl — one event per line (JSON
        Lines; blank lines are skipped and ``line`` in errors is the line of the body);
        Content-Type: application/json — an array of events, or ``{"events": [...]}``
        (``line`` is the event's position in the array, from 1).
        Event shapes, retraction and correction: see :mod:`analytics.services.production`.
        Query ``create_values=true`` creates unknown condition values of known dimensions.
    → 201 {cycles, interventions, duplicates, retracted, corrected, created_values}
    → 200 the same, when every event was a duplicate (a replay changes nothing)
    → 400 {"errors": [{"line", "field", "message"}]}   nothing stored
    → 404 {"detail", "deployments"}   a deployment the caller's organization does not have
    → 409 {"detail", "event_ids"}     ids already received with another body; nothing stored
    → 413 {"detail", "limit"}         more than 10,000 events
    → 503 {"detail"} + Retry-After    other batches kept storing the same events; send again
"""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import membership_of
from accounts.permissions import MANAGERS
from analytics.services.production import (
    MAX_EVENTS,
    BatchTooLarge,
    DeploymentNotFound,
    IngestError,
    ProductionBusy,
    ProductionConflict,
    ProductionInvalid,
    decode_json_body,
    production_ingest,
    production_ingest_batch,
    production_ingest_body,
)

# A generous ceiling per event, so a body can be refused before it is read.
MAX_BODY_BYTES = MAX_EVENTS * 8 * 1024


class RawBody:
    def __init__(self, media_type: str, content: bytes) -> None:
        self.media_type = media_type
        self.content = content


class _RawParser(BaseParser):
    """The body's bytes, untouched: the service parses them (and names the line of an error)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return RawBody(self.media_type, stream.read() if stream is not None else b"")


class JSONLinesParser(_RawParser):
    media_type = "application/x-ndjson"


class JSONLParser(_RawParser):
    media_type = "application/jsonl"


class JSONBodyParser(_RawParser):
    media_type = "application/json"


class ProductionEventSerializer(serializers.Serializer):
    """One event (documentation of the shape; the service validates it)."""

    event_id = serializers.CharField(max_length=100)
    deployment = serializers.SlugField(help_text="The deployment's slug.")
    # Plain text with the choices in the help: enums here would collide with other "kind"s.
    kind = serializers.CharField(required=False, help_text='"cycle" or "intervention".')
    op = serializers.CharField(
        required=False, help_text='"retract" or "correct"; omit for a new event.'
    )
    occurred_at = serializers.DateTimeField(required=False, help_text="ISO-8601 with offset.")
    outcome = serializers.CharField(required=False, help_text='"success" or "failure".')
    conditions = serializers.DictField(
        child=serializers.CharField(), required=False, help_text="{dimension slug: value slug}"
    )
    duration_s = serializers.FloatField(required=False, min_value=0)
    policy = serializers.SlugField(required=False, help_text="A policy version's slug.")
    failure_mode = serializers.CharField(required=False, help_text="A failure mode's code.")
    intervened_by = serializers.CharField(required=False, help_text='"harness" or "person".')
    note = serializers.CharField(required=False)
    recording = serializers.CharField(required=False, max_length=500)


class ProductionBatchSerializer(serializers.Serializer):
    events = ProductionEventSerializer(many=True)


class ProductionIngestResultSerializer(serializers.Serializer):
    cycles = serializers.IntegerField(help_text="New cycle events counted.")
    interventions = serializers.IntegerField(help_text="New interventions recorded.")
    duplicates = serializers.IntegerField(help_text="Events received before with this body.")
    retracted = serializers.IntegerField()
    corrected = serializers.IntegerField()
    created_values = serializers.ListField(child=serializers.CharField())


class ProductionIngestErrorSerializer(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField(allow_blank=True)
    message = serializers.CharField()


# Built for the schema only: a field named "errors" would shadow Serializer.errors.
ProductionIngestErrorsSerializer = inline_serializer(
    name="ProductionIngestErrors", fields={"errors": ProductionIngestErrorSerializer(many=True)}
)


class ProductionConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    event_ids = serializers.ListField(child=serializers.CharField())


class ProductionNotFoundSerializer(serializers.Serializer):
    detail = serializers.CharField()
    deployments = serializers.ListField(child=serializers.CharField())


class ProductionBusySerializer(serializers.Serializer):
    detail = serializers.CharField()


class ProductionTooLargeSerializer(serializers.Serializer):
    detail = serializers.CharField()
    limit = serializers.IntegerField()


def _errors(errors: list[IngestError]) -> Response:
    body = {"errors": [{"line": e.line, "field": e.field, "message": e.message} for e in errors]}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


def _too_large(count: int | None = None) -> Response:
    what = f"{count:,} events" if count is not None else "The body"
    return Response(
        {
            "detail": f"{what} is over the limit; send at most {MAX_EVENTS:,} events per batch.",
            "limit": MAX_EVENTS,
        },
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


def _json_events(content: bytes) -> list[Any] | Response:
    """The events of a JSON body (an array, or an object with ``events``), or the 400."""
    try:
        data = json.loads(content)
    except UnicodeDecodeError as exc:
        return _errors([IngestError(None, "", f"the body is not UTF-8 text ({exc.reason})")])
    except json.JSONDecodeError as exc:
        return _errors(
            [
                IngestError(
                    exc.lineno,
                    "",
                    f"the body is not valid JSON: {exc.msg} "
                    f"(line {exc.lineno}, column {exc.colno})",
                )
            ]
        )
    except (ValueError, RecursionError) as exc:
        return _errors([IngestError(None, "", f"the body is not valid JSON: {exc}")])
    if isinstance(data, dict):
        data = data.get("events")
    if not isinstance(data, list):
        return _errors(
            [IngestError(None, "events", 'expected an array of events, or {"events": [...]}')]
        )
    return data


class ProductionEventViewSet(viewsets.ViewSet):
    """Production events from the fleet: cycles, interventions, retractions, corrections."""

    parser_classes = [JSONLinesParser, JSONLParser, JSONBodyParser]
    write_roles = MANAGERS
    # The service names the line and field of a NUL character; the middleware would not.
    nul_checked_by_view = True

    @extend_schema(
        operation_id="production_events_ingest",
        request={
            "application/json": ProductionBatchSerializer,
            "application/x-ndjson": {"type": "string", "description": "One event per line."},
            "application/jsonl": {"type": "string", "description": "One event per line."},
        },
        parameters=[
            OpenApiParameter("create_values", bool, description="Create unknown condition values.")
        ],
        responses={
            200: ProductionIngestResultSerializer,
            201: ProductionIngestResultSerializer,
            400: ProductionIngestErrorsSerializer,
            404: ProductionNotFoundSerializer,
            409: ProductionConflictSerializer,
            413: ProductionTooLargeSerializer,
            503: ProductionBusySerializer,
        },
    )
    def create(self, request: Request) -> Response:
        if int(request.META.get("CONTENT_LENGTH") or 0) > MAX_BODY_BYTES:
            return _too_large()
        membership = membership_of(request.user)
        assert membership is not None  # the permission class guarantees it
        body = request.data
        if not isinstance(body, RawBody) or not body.content or body.content.isspace():
            return _errors([IngestError(None, "", "the body holds no events")])
        create_values = request.query_params.get("create_values", "").lower() in ("1", "true")
        try:
            batch = None
            if body.media_type == JSONBodyParser.media_type:
                batch = decode_json_body(body.content)
            if batch is not None:
                result = production_ingest_batch(
                    organization=membership.organization,
                    batch=batch,
                    actor=request.user,
                    create_values=create_values,
                )
            elif body.media_type == JSONBodyParser.media_type:
                # Not an array of valid events: parsed again to say what is wrong, or to take
                # the {"events": [...]} form.
                events = _json_events(body.content)
                if isinstance(events, Response):
                    return events
                if len(events) > MAX_EVENTS:
                    return _too_large(len(events))
                result = production_ingest(
                    organization=membership.organization,
                    events=events,
                    actor=request.user,
                    create_values=create_values,
                )
            else:
                result = production_ingest_body(
                    organization=membership.organization,
                    body=body.content,
                    actor=request.user,
                    create_values=create_values,
                )
        except BatchTooLarge as exc:
            return _too_large(exc.count)
        except ProductionInvalid as exc:
            return _errors(exc.errors)
        except DeploymentNotFound as exc:
            return Response(
                {"detail": str(exc), "deployments": exc.slugs}, status=status.HTTP_404_NOT_FOUND
            )
        except ProductionConflict as exc:
            return Response(
                {"detail": str(exc), "event_ids": exc.event_ids}, status=status.HTTP_409_CONFLICT
            )
        except ProductionBusy as exc:
            return Response(
                {"detail": str(exc)},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": "1"},
            )
        return Response(
            result.as_dict(),
            status=status.HTTP_201_CREATED if result.changed else status.HTTP_200_OK,
        )
