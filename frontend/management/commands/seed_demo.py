import time

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Build the demo programme (deterministic, idempotent). Demo logins use password 'demo'."

    def handle(self, *args: object, **options: object) -> None:
        from frontend.demo import seed_demo

        started = time.monotonic()
        counts = seed_demo()
        self.stdout.write(
            f"Demo programme ready in {time.monotonic() - started:.1f}s: "
            + ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in counts.items())
        )
