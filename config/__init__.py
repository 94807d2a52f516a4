import os

# One BLAS thread per process, set before numpy loads. Our matrices are small (a few hundred
# condition cells): OpenBLAS's thread pool gains nothing on them and, on a busy machine (web
# workers and Celery sharing the cores), its spinning threads made the curve fits and
# simulations about ten times slower. Processes scale out instead. Set it to override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from config.celery import app as celery_app

__all__ = ("celery_app",)
