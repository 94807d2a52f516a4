"""Print who may use each route: the role table read from the views' declarations."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from accounts.models import Role
from frontend.access import ANONYMOUS, route_table

COLUMNS = [*Role.values, ANONYMOUS]


class Command(BaseCommand):
    help = "Print the role matrix: every route and method with the roles allowed to use it."

    def handle(self, *args: Any, **options: Any) -> None:
        rows = route_table()
        width = max(len(pattern) + len(method) + 1 for pattern, method, _ in rows)
        self.stdout.write(f"{'route':<{width}}  " + "  ".join(f"{c:<9}" for c in COLUMNS))
        for pattern, method, roles in rows:
            marks = "  ".join(f"{'yes' if c in roles else '-':<9}" for c in COLUMNS)
            self.stdout.write(f"{method + ' /' + pattern:<{width + 1}} {marks}")
