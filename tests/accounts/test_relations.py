"""A write that links objects checks they belong to the same customer (and operator).

The operator runs campaigns for several customers, so tenant scoping alone lets a manager
link one customer's deployment into another's campaign, after which the second customer's
viewer reads the first's data. Every serializer field that links a customer's object is
found from the API's serializers (``customer_links``); each must have a case below that
links an object of another customer of the same operator and gets a 400 naming the field,
with nothing stored.
"""

from __future__ import annotations

from datetime import date

import pytest
from rest_framework.relations import ManyRelatedField, RelatedField

from accounts.apis import customer_of
from accounts.models import AuditEvent, Organization
from campaigns.models import Campaign, CollectionRound
from sites.models import Deployment, FailureRecord, Site
from tests.access import all_routes
from tests.factories import SiteFactory


@pytest.fixture
def brightline(world_a):
    """A second customer of world A's operator, with a site and a deployment of its own."""
    customer = Organization.objects.create(
        slug="brightline", name="Brightline", kind="customer", operator=world_a.operator
    )
    site = SiteFactory(
        organization=world_a.operator, customer=customer, slug="bl-site", name="Brightline DC"
    )
    deployment = Deployment.objects.create(
        organization=world_a.operator,
        customer=customer,
        slug="bl-dep",
        name="Brightline picking",
        site=site,
        embodiment=world_a.embodiment,
        task=world_a.task,
        cycles_per_day=500,
        reliability_target=0.999,
    )
    campaign = Campaign.objects.create(
        organization=world_a.operator,
        customer=customer,
        slug="bl-camp",
        name="Brightline H1",
        task=world_a.task,
        reliability_goal=0.999,
        start_date=date(2027, 1, 4),
        end_date=date(2027, 6, 30),
    )
    return customer, site, deployment, campaign


# Links that may cross customers on purpose: a policy version is the operator's and may be
# trained on rounds captured for several customers (one policy serves a fleet).
FREE_LINKS = {("PolicyVersionSerializer", "trained_on_rounds")}


def _model_of(field):
    queryset = field.child_relation.queryset if isinstance(field, ManyRelatedField) else None
    queryset = queryset if queryset is not None else getattr(field, "queryset", None)
    return queryset.model if queryset is not None else None


def customer_links() -> set[tuple[str, str]]:
    """(serializer, field) for every writable API field that links an object a customer owns."""
    found = set()
    for route in all_routes():
        cls = getattr(route.callback, "cls", None)
        serializer_class = getattr(cls, "serializer_class", None)
        if serializer_class is None or not ({"POST", "PUT", "PATCH"} & route.methods):
            continue
        for name, field in serializer_class().fields.items():
            if field.read_only or not isinstance(field, RelatedField | ManyRelatedField):
                continue
            model = _model_of(field)
            owned = model is Organization or getattr(
                model._default_manager.get_queryset(), "customer_path", None
            )
            if owned:
                found.add((serializer_class.__name__, name))
    return found


def campaign_payload(world, **extra):
    return {
        "slug": "new-campaign",
        "name": "New campaign",
        "customer": world.customer.slug,
        "task": world.task.pk,
        "embodiments": [world.embodiment.pk],
        "deployments": [world.deployment.pk],
        "reliability_goal": 0.999,
        "start_date": "2027-01-04",
        "end_date": "2027-03-01",
        **extra,
    }


def deployment_payload(world, **extra):
    return {
        "slug": "new-dep",
        "name": "New deployment",
        "customer": world.customer.slug,
        "site": world.site.pk,
        "embodiment": world.embodiment.pk,
        "task": world.task.pk,
        "cycles_per_day": 100,
        "reliability_target": 0.99,
        **extra,
    }


# (serializer, field, method, url, payload, model whose rows must not change)
def cases(world, other):
    customer, site, deployment, campaign = other
    return [
        (
            "RoundSerializer",
            "campaign",
            "patch",
            f"/api/rounds/{world.round.pk}/",
            {"campaign": campaign.pk},
        ),
        (
            "CampaignSerializer",
            "deployments",
            "post",
            "/api/campaigns/",
            campaign_payload(world, deployments=[world.deployment.pk, deployment.pk]),
        ),
        (
            "CampaignSerializer",
            "customer",
            "patch",
            f"/api/campaigns/{world.campaign.pk}/",
            {"customer": customer.slug},
        ),
        (
            "DeploymentSerializer",
            "site",
            "post",
            "/api/deployments/",
            deployment_payload(world, site=site.pk),
        ),
        (
            "DeploymentSerializer",
            "customer",
            "patch",
            f"/api/deployments/{world.deployment.pk}/",
            {"customer": customer.slug},
        ),
        (
            "SiteSerializer",
            "customer",
            "patch",
            f"/api/sites/{world.site.pk}/",
            {"customer": customer.slug},
        ),
        (
            "FailureRecordSerializer",
            "deployment",
            "patch",
            f"/api/failure-records/{world.failure_record.pk}/",
            {"deployment": deployment.pk},
        ),
    ]


def snapshot():
    return (
        sorted(Campaign.objects.values_list("pk", "customer_id", "slug")),
        sorted(
            (c.pk, sorted(c.deployments.values_list("pk", flat=True)))
            for c in Campaign.objects.all()
        ),
        sorted(Deployment.objects.values_list("pk", "customer_id", "site_id")),
        sorted(Site.objects.values_list("pk", "customer_id")),
        sorted(FailureRecord.objects.values_list("pk", "deployment_id")),
        sorted(CollectionRound.objects.values_list("pk", "campaign_id", "number")),
        AuditEvent.objects.count(),
    )


def test_every_field_that_links_a_customers_object_has_a_cross_customer_case(world_a, brightline):
    covered = {(serializer, field) for serializer, field, *_ in cases(world_a, brightline)}
    # Objects without a customer (embodiments, tasks, condition values) link freely.
    found = customer_links() - FREE_LINKS

    assert found - covered == set(), "add a cross-customer case for these fields"


@pytest.mark.parametrize("index", range(7))
def test_linking_another_customers_object_is_a_400_naming_the_field_and_stores_nothing(
    index, world_a, brightline, client_for
):
    serializer, field, method, url, payload = cases(world_a, brightline)[index]
    client = client_for(world_a.manager)
    before = snapshot()

    response = getattr(client, method)(url, payload, content_type="application/json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert "belongs to customer Brightline" in str(response.json()[field]) or (
        "not Brightline" in str(response.json()[field])
    )
    assert snapshot() == before


def test_the_same_writes_within_one_customer_succeed(world_a, brightline, client_for):
    client = client_for(world_a.manager)

    campaign = client.post(
        "/api/campaigns/", campaign_payload(world_a), content_type="application/json"
    )
    deployment = client.post(
        "/api/deployments/", deployment_payload(world_a), content_type="application/json"
    )

    assert campaign.status_code == 201, campaign.content
    assert deployment.status_code == 201, deployment.content
    assert AuditEvent.objects.filter(
        verb="deployment.create", object_type="sites.Deployment"
    ).exists()


def test_a_partners_site_without_a_customer_serves_any_customers_deployment(
    world_a, brightline, client_for
):
    partner = SiteFactory(organization=world_a.operator, customer=None, slug="partner-lab")

    response = client_for(world_a.manager).post(
        "/api/deployments/",
        deployment_payload(world_a, site=partner.pk),
        content_type="application/json",
    )

    assert response.status_code == 201, response.content


def test_the_probes_reproduction_leaks_nothing_to_the_other_customers_viewer(
    world_a, brightline, client_for
):
    from tests.factories import member

    _, _, deployment, _ = brightline
    manager = client_for(world_a.manager)

    created = manager.post(
        "/api/campaigns/",
        campaign_payload(world_a, deployments=[world_a.deployment.pk, deployment.pk]),
        content_type="application/json",
    )
    viewer = client_for(member(world_a.customer, "viewer", "viewer-northwind-2"))
    dashboard = viewer.get(f"/dashboard/{world_a.customer.slug}/")

    assert created.status_code == 400
    assert dashboard.status_code == 200
    assert "Brightline picking" not in dashboard.content.decode()


def test_customer_of_follows_the_querysets_customer_path(world_a, brightline):
    customer, site, deployment, _ = brightline

    assert customer_of(deployment) == customer.pk
    assert customer_of(site) == customer.pk
    assert customer_of(world_a.failure_record) == world_a.customer.pk
    assert customer_of(world_a.embodiment) is None
    assert customer_of(world_a.operator) is None
    assert customer_of(Campaign(customer=customer, start_date=date.today())) == customer.pk
