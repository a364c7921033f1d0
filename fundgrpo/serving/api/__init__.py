"""REST API for fund evaluations (FastAPI; OpenAPI docs at /docs).

    python -m fundgrpo.serving.api add-key NAME --scopes read,evaluate   # prints the key once, stores only its hash
    python -m fundgrpo.serving.api add-key NAME --client FIRM            # a client firm's key: its ratings only
    python -m fundgrpo.serving.api entitle FIRM SHARE_CLASS_ID ...       # which share classes it may read
    python -m fundgrpo.serving.api serve [--host 127.0.0.1] [--port 8000]

Endpoints: `POST /v1/evaluations` (scope evaluate; 1..`max_funds` funds as canonical metrics),
`GET /v1/evaluations/{share_class_id}` (scope read; the latest stored), `GET /v1/model` (scope
read; the serving version, its backtest metrics and gate decision), `GET /v1/review-queue` (scope
read), `POST /v1/decisions` (scope review), `GET /v1/decisions` (scope read), `GET /v1/audit`
(scope review), `POST /v1/publications` and `POST /v1/withdrawals` (scope publish: a rating to the
clients, a new immutable version each), `GET /v1/ratings`, `GET /v1/ratings/{share_class_id}` and
`GET /v1/ratings/{share_class_id}/history` (a client firm's key: its entitled share classes only; the
firm's keys with read: all; ratings.py), `/healthz`, `/readyz`, the analysts' page `/review`. Every answer's shape is in
`schemas.py` and shown, field by field, at /docs (Swagger UI 5, served from a wheel).
Clients send `X-API-Key`. No key or an unknown one: 401; a key without the scope: 403; over the
per-key rate: 429; a body over the size limit: 413; a bad field: 422 naming it; generation
over the time limit: 504.

The model is `models:/<register.model_name>@champion` unless FUNDGRPO_API_MODEL names another
URI or a folder; `champion` is followed only to a version the gate promoted (its gate record,
logged with its run): moved elsewhere by hand, the API keeps serving the promoted version and says
why in `GET /v1/model` (`note`). The alias is checked every `alias_check_s` seconds; when it moves, the new
version is loaded beside the old one and swapped in; requests already running finish on the
version they started with. Concurrent requests are batched: the model's one thread (every torch call runs
there: two OpenMP pools on two cores halve generation's speed) builds their prompts, in one call for requests
that share no category (no fund's peers change) and apart otherwise, and generates for them all. Evaluations are
stored in a database: SQLite by default, PostgreSQL by URL.

Settings come from the environment (keys never live in the repo); the store's default is params.yaml's:
  FUNDGRPO_API_KEYS        the hashed-keys file (default .api_keys.json; git-ignored)
  FUNDGRPO_DB_URL          the decision store; default `decisions.store_url` in params.yaml (the one the
                           `decisions` stage and the dashboard read): sqlite:///evaluations.db | postgresql+psycopg://...
  FUNDGRPO_API_MODEL       a models:/ URI or a folder (default: the champion)
  FUNDGRPO_API_MAX_FUNDS   32    FUNDGRPO_API_RATE_PER_MIN 60   FUNDGRPO_API_MAX_BYTES 262144
  FUNDGRPO_API_TIMEOUT_S   60    FUNDGRPO_API_ALIAS_CHECK_S 30  FUNDGRPO_API_BATCH_WAIT_MS 20
"""
