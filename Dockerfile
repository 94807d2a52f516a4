# Fieldcraft application image: web (gunicorn), Celery worker and beat all run from it.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FIELDCRAFT_DATA_DIR=/data DEBUG=0
RUN apt-get update && apt-get install -y --no-install-recommends postgresql-client curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 fieldcraft && mkdir -p /data && chown fieldcraft /data
WORKDIR /app
COPY pyproject.toml ./
RUN pip install --no-cache-dir . && pip uninstall -y fieldcraft || true
COPY . .
# Collected as the container serves them (DEBUG off: hashed names and their manifest); the
# key here only lets collectstatic start, the running container takes SECRET_KEY from compose.
RUN DEBUG=0 SECRET_KEY=collectstatic-only python manage.py collectstatic --no-input -v 0 \
    && chown -R fieldcraft /data
USER fieldcraft
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4"]
