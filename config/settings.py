"""Fieldcraft settings: one module, read from the environment.

Environment:
    DEBUG                 "1" for development (default "1"; `make run` sets "0" unless given).
    SECRET_KEY            required when DEBUG is off; the app refuses to start without it,
                          unless `make run` has generated FIELDCRAFT_DATA_DIR/secret_key.
    SECURE_COOKIES        "0" drops the Secure flag of the session and CSRF cookies with
                          DEBUG off (`make run` serves plain HTTP on this machine).
    ANON_THROTTLE_RATE    API requests an anonymous address may make (default "60/min").
    NUM_PROXIES           reverse proxies in front that append to X-Forwarded-For (default 0).
    ALLOWED_HOSTS         comma-separated host names.
    DATABASE_URL          postgres://...; default: the embedded server in .data/postgres
                          (FIELDCRAFT_PGDATA) that `make run` starts and manage.py joins.
    CELERY_BROKER_URL     redis://... or amqp://...; default: a filesystem broker under .data/.
    CELERY_TASK_ALWAYS_EAGER  "1" runs tasks in-process (tests).
    MEDIA_ROOT            where uploads and exports are stored (default .data/media).
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.embedded_db import settings_url

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("FIELDCRAFT_DATA_DIR", BASE_DIR / ".data"))


def env_bool(name: str, default: bool) -> bool:
    """Read a boolean environment variable ("1", "true", "yes", "on" are true)."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def local_secret_key(path: Path) -> str:
    """The key `make run` generated (config/run.py), or "" when there is no such file.

    Raises ImproperlyConfigured when others than its owner may read it. The app never
    creates this file, only `make run` does: a deployment without SECRET_KEY still refuses
    to start, unless `make run` ran in its very data folder, and then the key is random and
    private, not a known one.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return ""
    if mode & 0o077:
        raise ImproperlyConfigured(
            f"{path} is readable by others (mode {mode & 0o777:o}): `chmod 600 {path}`, or "
            "delete it and `make run` writes a new one (signed-in sessions end)."
        )
    return path.read_text().strip()


DEBUG = env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", "") or local_secret_key(DATA_DIR / "secret_key")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Fieldcraft refuses to start with DEBUG=0 and no SECRET_KEY: "
            "set SECRET_KEY to a long random string (e.g. `python -c 'import secrets; "
            "print(secrets.token_urlsafe(50))'`)."
        )
    SECRET_KEY = "dev-insecure-fieldcraft-key-only-for-debug"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "accounts",
    "sites",
    "labeling",
    "campaigns",
    "analytics",
    "frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "accounts.middleware.ContentSecurityPolicyMiddleware",
    "accounts.middleware.RejectNullBytesMiddleware",
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "frontend.context_processors.navigation",
            ],
        },
    }
]

# Without DATABASE_URL: the embedded server in .data/postgres, the one `make run` starts
# (manage.py starts it for its command when it is not running), never another server.
DATABASE_URL = settings_url(os.environ)
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
}
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("TEST_DATABASE_NAME", "test_fieldcraft")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
USE_THOUSAND_SEPARATOR = False

STATIC_URL = "/static/"
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request otherwise
STATICFILES_DIRS: list[tuple[str, Path] | Path] = []
try:  # plotly.js ships inside the plotly wheel: serve it ourselves, never from a CDN
    import plotly

    STATICFILES_DIRS.append(("vendor/plotly", Path(plotly.__file__).parent / "package_data"))
except ImportError:  # pragma: no cover - plotly is a hard dependency
    pass
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if not DEBUG
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", DATA_DIR / "media"))
MEDIA_URL = "/media/"
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 50 * 1024 * 1024

# Security: secure by default in production; `check --deploy` is clean with DEBUG=0.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx and the field app read it to send X-CSRFToken
X_FRAME_OPTIONS = "DENY"
CSRF_FAILURE_VIEW = "frontend.views.base.csrf_failure"  # in the layout, says what to do
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", 31536000))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# Login throttling: lock an account+IP after 5 failures for 15 minutes.
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", 5))
AXES_COOLOFF_TIME = float(os.environ.get("AXES_COOLOFF_HOURS", 0.25))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_ENABLED = env_bool("AXES_ENABLED", True)

REST_FRAMEWORK = {
    # Session CSRF checked on Django's request, so no body is parsed before permissions.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.IsMemberWithRole"],
    # Bodies nested too deep, lone surrogates and infinite numbers are a 400 at parse time;
    # rendering survives a lone surrogate that still reaches a response (through a query).
    "DEFAULT_PARSER_CLASSES": [
        "accounts.parsers.JSONParser",
        "accounts.parsers.FormParser",
        "accounts.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "accounts.renderers.JSONRenderer",
        "accounts.renderers.BrowsableAPIRenderer",
    ],
    # Relation filters choose among the caller's own objects (no existence oracle).
    "DEFAULT_FILTER_BACKENDS": [
        "accounts.filters.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
        "rest_framework.filters.SearchFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "accounts.pagination.DefaultPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Anonymous callers only (by address): members are not throttled, so the tablets' sync
    # retries, the test suite and bench/load.py never meet a 429 for being signed in.
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": os.environ.get("ANON_THROTTLE_RATE", "60/min")},
    # The caller is REMOTE_ADDR; with NUM_PROXIES unset DRF would believe any
    # X-Forwarded-For, and a made-up one per request would escape the throttle.
    "NUM_PROXIES": int(os.environ.get("NUM_PROXIES", 0)),
    "EXCEPTION_HANDLER": "accounts.apis.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Fieldcraft API",
    "DESCRIPTION": (
        "Plan targeted data-collection campaigns for robot learning. Every endpoint is scoped "
        "to the caller's organization; an object of another organization is a 404."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RoundStatusEnum": "campaigns.models.CollectionRound.Status",
        "CampaignStatusEnum": "campaigns.models.Campaign.Status",
        "JobStatusEnum": "accounts.models.Job.Status",
        "TaskRecordingKindEnum": "campaigns.models.TaskRecording.Kind",
    },
}

# Celery: a filesystem broker by default so `make run` needs no extra server; set
# CELERY_BROKER_URL=redis://... (docker-compose does) to scale out across machines.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "broker"
    for _sub in ("out", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE = {
    "requeue-stale-jobs": {
        "task": "accounts.tasks.jobs_requeue_stale",
        "schedule": float(os.environ.get("FIELDCRAFT_REQUEUE_SECONDS", 60)),
    },
    "purge-import-uploads": {
        "task": "labeling.tasks.inventory_uploads_purge",
        "schedule": 6 * 3600.0,
    },
    # Refits of campaigns whose evidence changed with no evaluation import: the fleet's
    # production under their policies (analytics.services.steering.curves.curves_refit_stale).
    "refit-on-new-outcomes": {
        "task": "analytics.tasks.curves_refit_stale",
        "schedule": float(os.environ.get("FIELDCRAFT_REFIT_SWEEP_SECONDS", 6 * 3600)),
    },
    "purge-abandoned-recording-uploads": {
        "task": "labeling.tasks.recording_uploads_purge",
        "schedule": 6 * 3600.0,
    },
}

CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["CACHE_URL"],
        }
        if os.environ.get("CACHE_URL")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"fieldcraft": {"level": os.environ.get("LOG_LEVEL", "INFO")}},
}

# Fieldcraft domain settings
# Chunk size of the tablet's recording uploads (each PUT; the server takes up to 16 MB).
FIELDCRAFT_UPLOAD_CHUNK_BYTES = int(os.environ.get("FIELDCRAFT_UPLOAD_CHUNK_BYTES", 4 * 1024**2))

# Video codec of exported datasets: libsvtav1 (AV1, as LeRobot writes) or libx264 (H.264).
FIELDCRAFT_EXPORT_CODEC = os.environ.get("FIELDCRAFT_EXPORT_CODEC", "libsvtav1")

FIELDCRAFT = {
    "TRANSFER_WEIGHT": float(os.environ.get("FIELDCRAFT_TRANSFER_WEIGHT", 0.3)),
    "JOB_STALE_SECONDS": int(os.environ.get("FIELDCRAFT_JOB_STALE_SECONDS", 120)),
    # Uploaded import files are kept this long after their import ends (to look into a
    # failed one), then removed by the daily purge.
    "UPLOAD_RETENTION_DAYS": float(os.environ.get("FIELDCRAFT_UPLOAD_RETENTION_DAYS", 7)),
    # Recordings an export converts at once (threads inside the export's job): the worker's
    # concurrency by default.
    "CONVERSION_WORKERS": int(
        os.environ.get("FIELDCRAFT_CONVERSION_WORKERS") or os.environ.get("CELERY_CONCURRENCY") or 2
    ),
    # Captures of the demo's played round that get a (synthetic) robot recording.
    "DEMO_RECORDINGS": int(os.environ.get("FIELDCRAFT_DEMO_RECORDINGS", 24)),
}
