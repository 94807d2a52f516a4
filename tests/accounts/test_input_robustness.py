"""Hostile input is a 400 that says what is wrong, never a server error (issue 15).

JSON nested thousands deep, lone UTF-16 surrogates and infinite numbers are refused when the
body is parsed (``accounts.parsers``); no body is parsed before the permission check; a lone
surrogate that still reaches a response cannot break its rendering; relation filters answer
another organization's id exactly as they answer an id that does not exist.
"""

from __future__ import annotations

import io
import json
from urllib.parse import quote

import pytest
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import ErrorDetail, ParseError

from accounts.parsers import JSONParser, json_too_deep
from accounts.renderers import JSONRenderer
from campaigns.models import Campaign, CollectionRound

DEEP = "[" * 5000 + "]" * 5000
UTF7_SURROGATE = quote("\ud800".encode("utf-7"))  # decodes, under charset=utf-7, to "\ud800"


def browser(user):
    """A signed-in client that must send a CSRF token, as a browser session does."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    return client, {"HTTP_X_CSRFTOKEN": token}


def token_client(user):
    token, _ = Token.objects.get_or_create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}")


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def parse(text: str):
    return JSONParser().parse(io.BytesIO(text.encode()), "application/json", {})


# ------------------------------------------------------------------ nesting depth


@pytest.mark.parametrize("role", ["viewer", "annotator", "field"])
def test_a_role_that_may_not_write_is_refused_before_a_deep_body_is_read(world_a, role):
    client, csrf = browser(getattr(world_a, role))
    campaigns_before = Campaign.objects.count()

    response = client.post("/api/campaigns/", DEEP, content_type="application/json", **csrf)

    assert response.status_code == 403
    assert response.json() == {"detail": "Your role does not allow this action."}
    assert Campaign.objects.count() == campaigns_before


def test_a_manager_posting_json_nested_5000_deep_gets_a_400_saying_so(world_a):
    client, csrf = browser(world_a.manager)
    campaigns_before = Campaign.objects.count()

    response = client.post("/api/campaigns/", DEEP, content_type="application/json", **csrf)

    assert response.status_code == 400
    assert response.json() == {
        "detail": "JSON parse error - the body nests arrays or objects more than 64 levels "
        "deep; send flatter data."
    }
    assert Campaign.objects.count() == campaigns_before


def test_deep_objects_inside_a_field_are_refused_through_a_token_too(world_a):
    body = '{"name": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"

    response = token_client(world_a.manager).patch(
        f"/api/campaigns/{world_a.campaign.pk}/", body, content_type="application/json"
    )

    assert response.status_code == 400
    assert "more than 64 levels deep" in response.json()["detail"]
    world_a.campaign.refresh_from_db()
    assert world_a.campaign.name == "Campaign QZALPHA"


def test_brackets_that_do_not_pair_up_are_invalid_json_not_a_crash(world_a):
    response = token_client(world_a.manager).post(
        "/api/campaigns/", "[" * 5000 + "}" * 5000, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()["detail"].startswith("JSON parse error")


def test_sixty_four_levels_parse_and_sixty_five_do_not():
    assert parse(nested(64)) == json.loads(nested(64))

    with pytest.raises(ParseError, match="more than 64 levels deep"):
        parse(nested(65))


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"note": "[" * 1000 + "{" * 1000, "quoted": '\\"[[[['})

    assert parse(text) == json.loads(text)


@settings(max_examples=60, deadline=None)
@given(
    depth=st.integers(min_value=0, max_value=200),
    filler=st.text(alphabet='[]{}"\\ab,:', max_size=12),
)
def test_the_depth_check_agrees_with_the_nesting_of_the_decoded_data(depth, filler):
    text = "[" * depth + json.dumps(filler) + "]" * depth

    assert json_too_deep(text) == (depth > 64)
    assert json.loads(text) is not None  # valid JSON whatever the filler holds


def test_a_number_too_large_for_a_float_is_refused_at_parse_time(world_a):
    response = token_client(world_a.manager).patch(
        f"/api/campaigns/{world_a.campaign.pk}/",
        '{"budget_hours": 1e999}',
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "too large for a float" in response.json()["detail"]
    world_a.campaign.refresh_from_db()
    assert world_a.campaign.budget_hours is None


# ------------------------------------------------------------------ lone surrogates


def test_a_lone_surrogate_in_a_choice_field_is_a_400_naming_the_field(world_a):
    response = token_client(world_a.manager).post(
        f"/api/rounds/{world_a.round.pk}/transition/",
        '{"to_status": "\\ud800"}',
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json() == {
        "detail": "The JSON body at to_status holds a lone UTF-16 surrogate (such as \\ud800), "
        "which is not a character; send the text as valid Unicode."
    }
    world_a.round.refresh_from_db()
    assert world_a.round.status == CollectionRound.Status.DRAFT


def test_a_lone_surrogate_in_a_uuid_field_is_a_400_naming_the_field(world_a):
    from campaigns.models import FieldRecord

    body = json.dumps({"uuid": "\udfff", "task": world_a.collection_task.pk, "kind": "note"})

    response = token_client(world_a.field).post(
        "/api/field/records/", body, content_type="application/json"
    )

    assert response.status_code == 400
    assert "The JSON body at uuid holds a lone UTF-16 surrogate" in response.json()["detail"]
    assert not FieldRecord.objects.exists()


def test_a_valid_surrogate_pair_is_an_ordinary_character(world_a):
    response = token_client(world_a.manager).patch(
        f"/api/campaigns/{world_a.campaign.pk}/",
        '{"name": "Campaign \\ud83e\\udd16"}',
        content_type="application/json",
    )

    assert response.status_code == 200
    assert response.json()["name"] == "Campaign \U0001f916"


def test_a_lone_surrogate_in_a_key_is_refused_too():
    with pytest.raises(ParseError) as refused:
        parse('{"\\ud800": 1}')

    assert str(refused.value.detail).startswith('The JSON body at ["\\ud800"] (a key) holds')


def test_a_form_body_smuggling_a_surrogate_through_its_charset_is_a_400(world_a):
    client, csrf = browser(world_a.manager)

    response = client.post(
        f"/api/rounds/{world_a.round.pk}/transition/",
        f"to_status={UTF7_SURROGATE}",
        content_type="application/x-www-form-urlencoded; charset=utf-7",
        **csrf,
    )

    assert response.status_code == 400
    assert response.json()["detail"].startswith('The form field "to_status" holds a lone')
    world_a.round.refresh_from_db()
    assert world_a.round.status == CollectionRound.Status.DRAFT


def test_a_query_smuggling_a_surrogate_through_the_request_charset_is_a_400(world_a, client_for):
    response = client_for(world_a.viewer).get(
        f"/api/campaigns/?status={UTF7_SURROGATE}", CONTENT_TYPE="text/plain; charset=utf-7"
    )

    assert response.status_code == 400
    assert response.json()["detail"].startswith('The query parameter "status" holds a lone')


def test_the_browsable_api_page_renders_a_smuggled_surrogate_as_a_replacement_character(
    world_a, client_for
):
    response = client_for(world_a.manager).get(
        f"/api/campaigns/?slug={UTF7_SURROGATE}",
        CONTENT_TYPE="text/plain; charset=utf-7",
        HTTP_ACCEPT="text/html",
    )

    assert response.status_code == 400
    page = response.content.decode("utf-8")  # strict: it is valid UTF-8
    assert "lone UTF-16 surrogate" in page


def test_json_rendering_replaces_a_lone_surrogate_instead_of_failing():
    data = {"detail": ErrorDetail('"\ud800" is not a valid choice.', code="invalid_choice")}

    rendered = JSONRenderer().render(data)

    assert json.loads(rendered.decode("utf-8")) == {"detail": '"\ufffd" is not a valid choice.'}


# ------------------------------------------------------------------ relation filters


FILTERS = [
    ("/api/rounds/", "campaign", "campaign"),
    ("/api/targets/", "round", "round"),
    ("/api/episodes/", "dataset", "dataset"),
    ("/api/evaluations/", "policy_version", "policy"),
    ("/api/assignments/", "annotator", "annotator"),
]


@pytest.mark.parametrize(("url", "param", "attribute"), FILTERS)
def test_another_organizations_id_in_a_filter_is_answered_like_an_id_that_does_not_exist(
    world_a, world_b, client_for, url, param, attribute
):
    client = client_for(world_a.manager)

    theirs = client.get(url, {param: getattr(world_b, attribute).pk})
    nobodys = client.get(url, {param: 10**9})

    assert theirs.status_code == nobodys.status_code == 200
    assert theirs.json() == nobodys.json()
    assert theirs.json()["results"] == []


@pytest.mark.parametrize(("url", "param", "attribute"), FILTERS)
def test_the_callers_own_id_in_a_filter_still_filters(
    world_a, world_b, client_for, url, param, attribute
):
    response = client_for(world_a.manager).get(url, {param: getattr(world_a, attribute).pk})

    assert response.status_code == 200
    assert len(response.json()["results"]) == 1


def test_a_customer_viewer_cannot_probe_another_customers_campaign_ids(
    world_a, world_b, client_for
):
    client = client_for(world_a.viewer)

    theirs = client.get("/api/rounds/", {"campaign": world_b.campaign.pk})
    nobodys = client.get("/api/rounds/", {"campaign": 10**9})

    assert theirs.status_code == nobodys.status_code == 200
    assert theirs.json() == nobodys.json()
    assert theirs.json()["results"] == []


def test_a_filter_that_is_not_a_relation_still_says_what_is_wrong(world_a, client_for):
    response = client_for(world_a.manager).get("/api/rounds/", {"status": "finished"})

    assert response.status_code == 400
    assert response.json() == {
        "status": ["Select a valid choice. finished is not one of the available choices."]
    }


def test_the_browsable_filter_form_offers_only_the_callers_own_objects(
    world_a, world_b, client_for
):
    response = client_for(world_a.manager).get("/api/rounds/", HTTP_ACCEPT="text/html")

    page = response.content.decode()
    assert response.status_code == 200
    assert "Campaign QZALPHA" in page
    assert "Campaign QZBRAVO" not in page
