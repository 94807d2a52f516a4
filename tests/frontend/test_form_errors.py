"""Page forms answer bad input with a message on the page, never a server error (issue 15).

Each case posts what a form cannot use (a number beyond its column, text where an id
belongs) and checks the page that follows: status 200, the message, and nothing stored.
"""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.models import Job
from analytics.models import EvaluationRun, PolicyVersion
from campaigns.models import CollectionRound


def messages_on(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_a_target_of_more_episodes_than_a_column_holds_is_a_message(world_a, client_for):
    target = world_a.target

    response = client_for(world_a.manager).post(
        f"/planner/rounds/{world_a.round.pk}/do/target/",
        {"target": target.pk, "episodes": "99999999999999999999"},
        follow=True,
    )

    assert response.status_code == 200
    assert messages_on(response) == ["Episodes wanted must be between 0 and 2,147,483,647."]
    target.refresh_from_db()
    assert (target.episodes_wanted, target.locked) == (40, False)


def test_a_target_of_words_instead_of_episodes_is_a_message(world_a, client_for):
    response = client_for(world_a.manager).post(
        f"/planner/rounds/{world_a.round.pk}/do/target/",
        {"target": world_a.target.pk, "episodes": "forty"},
        follow=True,
    )

    assert response.status_code == 200
    assert messages_on(response) == ["Episodes wanted must be a whole number; 'forty' is not."]
    world_a.target.refresh_from_db()
    assert world_a.target.episodes_wanted == 40


def test_planning_with_days_or_budgets_out_of_range_is_a_message_and_queues_nothing(
    world_a, client_for
):
    client = client_for(world_a.manager)
    jobs_before = Job.objects.filter(kind="plan").count()

    too_long = client.post(
        f"/planner/rounds/{world_a.round.pk}/do/plan/", {"days": "99999999999"}, follow=True
    )
    negative = client.post(
        f"/planner/rounds/{world_a.round.pk}/do/plan/", {"budget_hours": "-5"}, follow=True
    )
    bad_date = client.post(
        f"/planner/rounds/{world_a.round.pk}/do/plan/", {"start": "someday"}, follow=True
    )

    assert [r.status_code for r in (too_long, negative, bad_date)] == [200, 200, 200]
    assert messages_on(too_long) == ["Days must be between 1 and 120."]
    assert messages_on(negative) == ["Field hours must be between 0 and 1,000,000,000,000."]
    assert messages_on(bad_date) == ["Start must look like 2027-01-31; 'someday' does not."]
    assert Job.objects.filter(kind="plan").count() == jobs_before


def test_starting_a_round_for_a_campaign_that_is_not_an_id_is_a_message(world_a, client_for):
    rounds_before = CollectionRound.objects.count()

    response = client_for(world_a.manager).post(
        "/planner/rounds/new/", {"campaign": "abc"}, follow=True
    )

    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == "/planner/"
    assert messages_on(response) == ["The campaign must be a whole number; 'abc' is not."]
    assert CollectionRound.objects.count() == rounds_before


def test_starting_a_round_in_another_organizations_campaign_is_a_404(world_a, world_b, client_for):
    rounds_before = CollectionRound.objects.count()

    response = client_for(world_a.manager).post(
        "/planner/rounds/new/", {"campaign": world_b.campaign.pk}
    )

    assert response.status_code == 404
    assert CollectionRound.objects.count() == rounds_before


def results_file(text: str, name: str = "results.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


def test_importing_evaluations_for_a_policy_that_is_not_an_id_is_a_message(world_a, client_for):
    runs_before = EvaluationRun.objects.count()

    response = client_for(world_a.manager).post(
        "/planner/evaluations/",
        {"file": results_file("lighting,trials,successes\ndim,10,9\n"), "policy": "abc"},
        follow=True,
    )

    assert response.status_code == 200
    assert messages_on(response) == ["The policy version must be a whole number; 'abc' is not."]
    assert EvaluationRun.objects.count() == runs_before


def test_importing_more_trials_than_a_column_holds_is_a_message_naming_the_row(world_a, client_for):
    runs_before = EvaluationRun.objects.count()

    response = client_for(world_a.manager).post(
        "/planner/evaluations/",
        {
            "file": results_file(f"lighting,trials,successes\ndim,{2**31},1\n"),
            "policy": world_a.policy.pk,
        },
        follow=True,
    )

    assert response.status_code == 200
    assert messages_on(response) == [
        "results.csv row 2, column 'trials': expected a whole number of at most 2,147,483,647, "
        "got '2147483648'"
    ]
    assert EvaluationRun.objects.count() == runs_before


def test_importing_rows_that_add_up_past_a_column_is_a_message(world_a, client_for):
    rows = "".join(f"dim,{2**30},1\n" for _ in range(3))

    response = client_for(world_a.manager).post(
        "/planner/evaluations/",
        {"file": results_file("lighting,trials,successes\n" + rows), "policy": world_a.policy.pk},
        follow=True,
    )

    assert response.status_code == 200
    assert "add up to more than 2,147,483,647 trials" in messages_on(response)[0]
    assert not EvaluationRun.objects.filter(label="results.csv").exists()


def test_importing_json_results_with_infinite_trials_or_deep_nesting_is_a_message(
    world_a, client_for
):
    client = client_for(world_a.manager)

    infinite = client.post(
        "/planner/evaluations/",
        {
            "file": results_file(
                '{"results": [{"lighting": "dim", "trials": 1e999, "successes": 1}]}',
                "r.json",
            ),
            "policy": world_a.policy.pk,
        },
        follow=True,
    )
    deep = client.post(
        "/planner/evaluations/",
        {"file": results_file("[" * 5000 + "]" * 5000, "d.json"), "policy": world_a.policy.pk},
        follow=True,
    )

    assert infinite.status_code == deep.status_code == 200
    assert "column 'trials': expected a whole number" in messages_on(infinite)[0]
    assert messages_on(deep) == ["d.json: the JSON nests too deep to be results"]
    assert not EvaluationRun.objects.filter(label__in=["r.json", "d.json"]).exists()


def test_registering_a_policy_with_a_bad_embodiment_or_date_is_a_message(world_a, client_for):
    client = client_for(world_a.manager)
    policies_before = PolicyVersion.objects.count()

    bad_embodiment = client.post(
        "/planner/evaluations/",
        {"action": "policy", "slug": "pi-new", "embodiment": "abc"},
        follow=True,
    )
    bad_date = client.post(
        "/planner/evaluations/",
        {
            "action": "policy",
            "slug": "pi-new",
            "embodiment": world_a.embodiment.pk,
            "released_on": "last week",
        },
        follow=True,
    )
    bad_slug = client.post(
        "/planner/evaluations/",
        {"action": "policy", "slug": "pi new!", "embodiment": world_a.embodiment.pk},
        follow=True,
    )

    assert [r.status_code for r in (bad_embodiment, bad_date, bad_slug)] == [200, 200, 200]
    assert messages_on(bad_embodiment) == ["The embodiment must be a whole number; 'abc' is not."]
    assert messages_on(bad_date) == ["Released on must look like 2027-01-31; 'last week' does not."]
    assert messages_on(bad_slug) == [
        "The slug may hold only letters, digits, hyphens and underscores."
    ]
    assert PolicyVersion.objects.count() == policies_before
