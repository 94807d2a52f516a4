"""Writes for the world model, in named parts.

* :mod:`sites.services.conditions` — condition sets and values, a deployment's profile;
* :mod:`sites.services.world` — embodiments, sites and deployments;
* :mod:`sites.services.taxonomy` — condition dimensions and failure modes;
* :mod:`sites.services.writes` — what they share: refusals, link checks, child lists.

The public names are re-exported here, so callers import from ``sites.services``.
"""

from sites.services.conditions import (
    ConditionError,
    ConditionLookup,
    condition_lookup,
    condition_set_intern,
    condition_sets_intern,
    condition_values_resolve,
    deployment_profile_set,
)
from sites.services.taxonomy import (
    condition_dimension_create,
    condition_dimension_update,
    failure_mode_create,
    failure_mode_update,
)
from sites.services.world import (
    deployment_create,
    deployment_update,
    embodiment_create,
    embodiment_update,
    site_create,
    site_update,
)
from sites.services.writes import (
    DuplicateChild,
    InUse,
    LinkRefused,
    RigInUse,
    Row,
    ValueInUse,
    children_sync,
    fields_set,
    jsonable,
    links_check,
    refuse_if_used,
)

__all__ = [
    "ConditionError",
    "ConditionLookup",
    "DuplicateChild",
    "InUse",
    "LinkRefused",
    "RigInUse",
    "Row",
    "ValueInUse",
    "children_sync",
    "condition_dimension_create",
    "condition_dimension_update",
    "condition_lookup",
    "condition_set_intern",
    "condition_sets_intern",
    "condition_values_resolve",
    "deployment_create",
    "deployment_profile_set",
    "deployment_update",
    "embodiment_create",
    "embodiment_update",
    "failure_mode_create",
    "failure_mode_update",
    "fields_set",
    "jsonable",
    "links_check",
    "refuse_if_used",
    "site_create",
    "site_update",
]
