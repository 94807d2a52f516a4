"""The steps of building a round plan, each in its own module.

``campaigns.services.plan.round_plan`` orchestrates: :mod:`.inputs` (what a plan is built
from), :mod:`.fixed` (locked visits and counts decided upstream, placed at sites),
:mod:`.draft` (schedule and visits in memory) and :mod:`.store` (the draft as the checker sees
it, and writing it). Everything before :func:`.store.plan_store` only reads, so a plan the
checker refuses leaves the database as it was.
"""

from campaigns.services.plan_steps.draft import Draft, DraftTask, in_words, plan_draft, split_visits
from campaigns.services.plan_steps.fixed import FixedItems, fixed_items
from campaigns.services.plan_steps.inputs import PlanInputs, site_specs
from campaigns.services.plan_steps.store import draft_check_tasks, plan_store

__all__ = [
    "Draft",
    "DraftTask",
    "FixedItems",
    "PlanInputs",
    "draft_check_tasks",
    "fixed_items",
    "in_words",
    "plan_draft",
    "plan_store",
    "site_specs",
    "split_visits",
]
