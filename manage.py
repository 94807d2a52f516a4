#!/usr/bin/env python
"""Django's command-line utility for administrative tasks.

Without DATABASE_URL it uses the embedded PostgreSQL that `make run` uses (``.data/postgres``):
it joins the server `make run` keeps running, or starts it for the length of the command, as
`make test`, `make lint` and `make backup` do (see config/embedded_db.py). Run with a Python
that lacks Django (``python manage.py`` outside the virtualenv), it runs itself again with
``.venv/bin/python``, the environment `make run` installed.
"""

import os
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent / ".venv"


def main() -> None:
    try:
        import django  # noqa: F401
    except ImportError:
        python = VENV / "bin" / "python"
        if Path(sys.prefix).resolve() != VENV.resolve() and python.exists():
            os.execv(python, [str(python), *sys.argv])  # noqa: S606 - argv as given, no shell
        raise SystemExit(
            "Django is not installed for this Python: run `make run` first (it installs the "
            "project into .venv/), then `python manage.py ...` again."
        ) from None
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if not os.environ.get("DATABASE_URL"):
        from config.embedded_db import join_for_command

        server = join_for_command(os.environ)  # noqa: F841 - held until the command ends
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
