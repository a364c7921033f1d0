"""REST API for fund evaluations (FastAPI; OpenAPI docs at /docs).

    python -m fundgrpo.serving.api add-key NAME --scopes read,evaluate   # prints the key once, stores only its hash
    python -m fundgrpo.serving.api serve [--host 127.0.0.1] [--port 8000]

Endpoints: `POST /v1/evaluations` (scope evaluate; 1..`max_funds` funds as canonical metrics),
`GET /v1/evaluations/{share_class_id}` (scope read; the latest stored), `GET /v1/model` (scope
read; the serving version, its backtest metrics and gate decision), `/healthz`, `/readyz`.
Clients send `X-API-Key`. No key or an unknown one: 401; a key without the scope: 403; over the
per-key rate: 429; a body over the size limit: 413; a bad field: 422 naming it; generation
over the time limit: 504.

The model is `models:/<register.model_name>@champion` unless FUNDGRPO_API_MODEL names another
URI or a folder. The alias is checked every `alias_check_s` seconds; when it moves, the new
version is loaded beside the old one and swapped in; requests already running finish on the
version they started with. Concurrent requests are batched for generation. Evaluations are
stored in a database: SQLite by default, PostgreSQL by URL.

Settings come from the environment only (keys never live in the repo):
  FUNDGRPO_API_KEYS        the hashed-keys file (default .api_keys.json; git-ignored)
  FUNDGRPO_DB_URL          sqlite:///evaluations.db | postgresql+psycopg://user@host/db ...
  FUNDGRPO_API_MODEL       a models:/ URI or a folder (default: the champion)
  FUNDGRPO_API_MAX_FUNDS   32    FUNDGRPO_API_RATE_PER_MIN 60   FUNDGRPO_API_MAX_BYTES 262144
  FUNDGRPO_API_TIMEOUT_S   60    FUNDGRPO_API_ALIAS_CHECK_S 30  FUNDGRPO_API_BATCH_WAIT_MS 20
"""
