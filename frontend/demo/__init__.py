"""The demo programme: a realistic, deterministic world for `make run` and the tests.

Everything is keyed by natural keys and written with get-or-create / upserts, so running
``seed_demo`` twice leaves the same database, and running it on a database a person has
been working in adds what is missing without touching their work. The random draws use a
fixed seed; the "true" failure model below exists only here, to make evaluation results
and production failures that behave like a real policy's (worse where training is thin).

The package's parts: :mod:`.data` (the world as data), :mod:`.world` (``seed_demo``),
:mod:`.generate` (synthetic inventory, production and evaluations) and :mod:`.round`
(``demo_round``).
"""

from frontend.demo.round import demo_round
from frontend.demo.world import seed_demo

__all__ = ["demo_round", "seed_demo"]
