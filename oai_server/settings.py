"""Every setting of the server, defined once.

The command line (`--max-model-len`), the environment (`OAI_MAX_MODEL_LEN`) and the
Helm chart's values all map onto this one class. The engine's settings are defined
once in `engine/settings.py`, with vLLM's own names (a user of `vllm serve` already
knows them), and this class inherits them: each `--model` is started with them. A
`--models-file` lists models each with engine settings of its own (`ModelEntry`, in
`models/entries.py`: the same fields again, checked as strictly; an unknown key stops
the start).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from oai_server.engine.settings import EngineOptions, check_model_source

# The names of the models that ship with the server (oai_server/models/embedded_*.py):
# what is served, and answered, when no model is named.
EMBEDDED_MODEL_NAME = "smollm2-135m-instruct"
EMBEDDED_EMBEDDING_MODEL_NAME = "all-minilm-l6-v2"


def check_tool_call_parser(name: str) -> str:
    """`name` if it is `auto`, `none` or in vLLM's tool-parser registry (read only then)."""
    if name in ("auto", "none"):
        return name
    from oai_server.engine.vllm.parsing import tool_parser_names

    names = tool_parser_names()
    if name not in names:
        raise ValueError(
            f"unknown tool-call parser '{name}'; valid: auto, none, {', '.join(names)}"
        )
    return name


# One value as a string, or several as a list (comma-separated in the environment): in
# values files and Serve args alike.
Names = Annotated[
    list[str],
    NoDecode,
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
]


class Settings(BaseSettings, EngineOptions):
    """oai-server: an OpenAI-compatible chat and completions server on vLLM."""

    model_config = SettingsConfigDict(
        env_prefix="OAI_",
        cli_prog_name="oai-server",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        cli_hide_none_type=True,
        cli_avoid_json=True,
        extra="ignore",
    )

    # --- HTTP -----------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, description="Port to listen on.")
    max_request_bytes: int = Field(
        4 * 1024 * 1024, description="Largest request body accepted (else 413)."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Log level."
    )
    uvicorn_log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] | None = (
        Field(None, description="uvicorn's own log level; default: --log-level.")
    )
    root_path: str = Field(
        "",
        description="The path prefix a proxy serves this server under (ASGI root_path), "
        "as vllm serve's --root-path.",
    )
    ssl_keyfile: Path | None = Field(None, description="TLS: the private key file (PEM).")
    ssl_certfile: Path | None = Field(
        None, description="TLS: the certificate file (PEM); with --ssl-keyfile, serves HTTPS."
    )
    ssl_ca_certs: Path | None = Field(
        None, description="TLS: the CA certificates that client certificates are checked against."
    )
    ssl_cert_reqs: int = Field(
        0,
        description="TLS: whether a client certificate is required (Python's ssl.CERT_*: "
        "0 none, 1 optional, 2 required).",
    )

    # --- work one request may ask for -------------------------------------------
    max_request_tokens: int | None = Field(
        262_144,
        ge=1,
        description="Most tokens one request may ask for: its prompt tokens plus n x "
        "max_tokens, summed over a completions batch's prompts (else 400); unset: no bound.",
    )
    max_request_prompts: int = Field(
        1024, ge=1, description="Most prompts in one /v1/completions batch (else 400)."
    )
    strict_max_tokens: bool = Field(
        False,
        description="Refuse (400 context_length_exceeded) a max_tokens, max_completion_tokens "
        "or max_output_tokens past the room the prompt leaves in the context, as OpenAI and "
        "Anthropic do; by default the answer may run to the end of the context and ends "
        "there for length, as vllm serve answers (agents ask for 32,000 tokens).",
    )
    max_score_documents: int = Field(
        1024,
        ge=1,
        description="Most documents one /v1/rerank request may rank, or pairs one /v1/score "
        "request may score (else 400); each is one engine request, all sent at once.",
    )

    # --- images a request carries or points at (oai_server/media) ----------------
    # Where they may come from is vLLM's --allowed-media-domains and
    # --allowed-local-media-path; how many a prompt may carry, its --limit-mm-per-prompt.
    media_fetch_timeout: float = Field(
        5.0,
        gt=0,
        description="Seconds an image URL may take to fetch, redirects included (else 400); "
        "vLLM's VLLM_IMAGE_FETCH_TIMEOUT default.",
    )
    media_max_bytes: int = Field(
        20 * 1024 * 1024,
        ge=1,
        description="Most bytes one image may have, fetched, inline (data: URL) or uploaded "
        "(else 400).",
    )
    media_max_redirects: int = Field(
        3, ge=0, description="Most redirects an image URL may take (else 400)."
    )
    media_max_request_pixels: int = Field(
        128 * 1024 * 1024,
        ge=1,
        description="Most pixels one request's images may declare together (width x height, "
        "read from each header before anything is decoded; else 400 naming the image that "
        "goes over). One image may have at most 64 Mi pixels.",
    )
    media_max_server_pixels: int = Field(
        256 * 1024 * 1024,
        ge=1,
        description="Most pixels being decoded at full size at once, server-wide (4 bytes "
        "each); further images wait their turn. Each is then shrunk to the model's size.",
    )
    media_max_request_fetches: int = Field(
        4,
        ge=1,
        description="Images of one request fetched and decoded at once; the rest wait.",
    )
    media_max_server_fetches: int = Field(
        32,
        ge=1,
        description="Image URLs fetched at once, server-wide; further fetches wait their turn "
        "(--media-fetch-timeout counts from then).",
    )

    # --- answers (vllm serve's front-end flags of the same names) ---------------
    return_tokens_as_token_ids: bool = Field(
        False,
        description="Name each logprobs token token_id:N, not by its text, so that tokens "
        "that are no whole UTF-8 text can be told apart (as vllm serve's flag).",
    )
    enable_force_include_usage: bool = Field(
        False,
        description="Every streamed chat and text completion reports usage, on each chunk "
        "and a last chunk of its own, as if it asked for stream_options include_usage and "
        "continuous_usage_stats (as vllm serve's flag).",
    )

    # --- web chat page --------------------------------------------------------
    web_ui: bool = Field(
        True, description="Serve the built-in chat page at / (its files under /ui/)."
    )

    # --- models ---------------------------------------------------------------
    # One model as a string, or several as a list: in values files and Serve args alike.
    model: Names = Field(
        default_factory=list,
        description="A chat model: a Hugging Face id or local directory, or name=path to "
        "serve it as name; repeat for several models, each on its own engine started with "
        "these engine flags (comma-separated in OAI_MODEL); default: the embedded "
        "SmolLM2-135M-Instruct.",
    )
    served_model_name: Names = Field(
        default_factory=list,
        description="Model ids clients use for the first --model (unless it is given as "
        "name=path): the first is its name, any others aliases a request may use as well, "
        "as vllm serve takes them (comma-separated in OAI_SERVED_MODEL_NAME); default: the "
        "--model value, or smollm2-135m-instruct.",
    )
    models_file: Path | None = Field(
        None,
        description="A YAML file listing every model to serve (in place of --model and "
        "--embedding-model), each with its name, kind (chat or embedding) and engine "
        "settings of its own: see docs/models/index.md.",
    )
    embedding_model: str = Field(
        EMBEDDED_EMBEDDING_MODEL_NAME,
        description="The embedding model served beside the chat model at /v1/embeddings, "
        "on its own engine: all-minilm-l6-v2 is the embedded all-MiniLM-L6-v2; else a "
        "Hugging Face id or local directory; none serves no embeddings.",
    )
    lora_dir: Path | None = Field(
        None,
        description="A directory of LoRA adapters (one subdirectory each, in PEFT layout): a "
        "request whose model names one loads it on first use; the only place "
        "--allow-runtime-lora may load from.",
    )
    allow_runtime_lora: bool = Field(
        False,
        description="Serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (paths "
        "inside --lora-dir only, behind the API keys).",
    )
    chat_template: Path | None = Field(
        None, description="A Jinja chat template file that replaces the model's own."
    )
    tool_parser_plugin: str | None = Field(
        None,
        description="A Python file that registers tool-call parsers of its own with vLLM's "
        "ToolParserManager, as vllm serve's --tool-parser-plugin; its names are then valid "
        "for --tool-call-parser.",
    )
    tool_call_parser: str = Field(
        "auto",
        description="How tool calls are read from free text for tool_choice 'auto': auto "
        "(the parser of the model's family, recognised from its chat template, special "
        "tokens and architecture; a model of no known family gets the built-in Hermes "
        "parser), any name in vLLM's tool-parser registry (hermes, llama3_json, mistral, "
        "...: vLLM's parser), or none (refuse 'auto'). 'required' and named tools work on "
        "any model.",
    )
    enable_auto_tool_choice: bool = Field(
        False,
        description="Accepted so vllm serve command lines carry over: tool_choice 'auto' is "
        "served whenever --tool-call-parser gives a parser.",
    )
    reasoning_parser: str = Field(
        "auto",
        description="How the model's thinking is told apart from its answer (message.reasoning): "
        "a name of vLLM's reasoning parsers, as vllm serve --reasoning-parser takes it "
        "(deepseek_r1, qwen3, ...); auto: the model's own, where its family is recognised "
        "(a model with <think> and </think> and no family's markers: deepseek_r1 for a "
        "template of R1's lineage, else the built-in think parser, which splits only where "
        "the tags are); none: the whole answer is content.",
    )
    cache_dir: Path = Field(
        Path.home() / ".cache" / "oai-server",
        description="Where the embedded model is converted once and kept.",
    )

    # --- Realtime WebSocket (oai_server/realtime) ----------------------------------
    realtime_idle_timeout: float = Field(
        600.0,
        gt=0,
        description="Seconds a Realtime WebSocket session may stay silent before it is closed.",
    )

    # --- Responses WebSocket mode (oai_server/responses/websocket.py) --------------
    responses_ws_max_lifetime: float = Field(
        3600.0,
        gt=0,
        description="Seconds a Responses WebSocket may stay open (OpenAI's limit: 60 minutes); "
        "then it gets a websocket_connection_limit_reached error and is closed, once any "
        "answer in progress has ended.",
    )

    # --- store (stored chat completions; later responses and conversations) ---
    data_dir: Path = Field(
        Path.home() / ".local" / "share" / "oai-server",
        description="Where the server keeps its data (the default SQLite store); "
        "created on first use.",
    )
    store_url: str | None = Field(
        None,
        description="Database of stored completions: sqlite:///path or "
        "postgresql://user:pass@host/db (shared by replicas); default: SQLite in --data-dir.",
    )
    store_all: bool = Field(
        False,
        description="Audit log: store every chat completion, whatever its 'store' field says.",
    )
    store_retention_days: float | None = Field(
        None, description="Delete stored objects older than this many days (default: keep)."
    )

    # --- Batch API (oai_server/batch; files and batches live in the store) --------
    files_max_bytes: int = Field(
        200_000_000,
        ge=1,
        le=200_000_000,
        description="Largest file POST /v1/files accepts, in bytes (OpenAI's ceiling: 200 MB).",
    )
    batch_max_in_flight: int = Field(
        4,
        ge=1,
        description="Batch lines this replica runs at once while interactive requests are "
        "in flight; a line starts only while the engine has no request queued, so "
        "interactive requests go first.",
    )
    batch_max_in_flight_idle: int = Field(
        32,
        ge=1,
        description="Batch lines this replica runs at once while no interactive request is "
        "in flight (the idle engine's capacity); when one arrives, the lines beyond "
        "--batch-max-in-flight are handed back (aborted, run again later).",
    )
    batch_idle_seconds: float = Field(
        2.0,
        ge=0,
        description="How long no interactive request must have been in flight before batch "
        "lines take the idle engine (--batch-max-in-flight-idle); a chat pausing less between "
        "requests keeps them at --batch-max-in-flight.",
    )
    batch_lease_seconds: float = Field(
        30.0,
        gt=0,
        description="How long a replica holds a batch without renewing; after a replica "
        "dies, another takes its batches over once this passes.",
    )
    service_tier_priority_keys: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description="The API keys, by id ('key-' and 12 hex digits, as the access log names "
        "them; 'oai-server key-id KEY' prints one; a configured key's id from releases "
        "before the server secret is read as its id now), that may ask for service_tier "
        "'priority' or a negative 'priority' (repeat, or comma-separated); default: every "
        "key. Another key's 'priority' request is served at the 'default' tier.",
    )

    # --- Ray Serve (oai_server.ray_serve; ignored by the plain server) ------------
    ray_min_replicas: int = Field(1, ge=0, description="Ray Serve: fewest replicas kept.")
    ray_max_replicas: int = Field(1, ge=1, description="Ray Serve: most replicas started.")
    ray_target_ongoing_requests: float = Field(
        16.0,
        gt=0,
        description="Ray Serve: requests in flight per replica the autoscaler aims for "
        "(running plus queued for the replica).",
    )
    ray_max_ongoing_requests: int = Field(
        256,
        ge=1,
        description="Ray Serve: most requests sent to one replica at once; more wait in the proxy.",
    )
    ray_upscale_delay_s: float = Field(
        30.0,
        ge=0,
        description="Ray Serve: load must stay high this long before a replica is added.",
    )
    ray_downscale_delay_s: float = Field(
        600.0, ge=0, description="Ray Serve: load must stay low this long before one is removed."
    )
    ray_router: Literal["default", "affinity"] = Field(
        "default",
        description="Ray Serve: how requests find a replica: default (Serve's: the less "
        "loaded of two random replicas) or affinity (a gateway reads each request and keeps "
        "a conversation, a prompt_cache_key or a long shared prefix on one replica while it "
        "holds at most 1.1 times its share of the requests in flight and is below "
        "--ray-target-ongoing-requests).",
    )
    ray_num_cpus: float = Field(1.0, ge=0, description="Ray Serve: CPUs each replica reserves.")
    ray_cpu_cores: Literal["shared", "per-replica"] = Field(
        "shared",
        description="Ray Serve, CPU: shared: every replica's engines compute on "
        "--cpu-threads-bind's cores; per-replica: replicas on one node compute on cores of "
        "their own, the replica of node-local rank r on cores r*k to (r+1)*k-1 of those its "
        "process may use (k: --ray-num-cpus rounded down, at least 1; more replicas than "
        "slices wrap around), overriding --cpu-threads-bind.",
    )
    ray_num_gpus: float = Field(
        0.0,
        ge=0,
        description="Ray Serve: GPUs per engine worker (1 on a GPU cluster); with "
        "--tensor-parallel-size N > 1 a replica reserves a placement group of N such bundles.",
    )
    ray_graceful_shutdown_timeout_s: float = Field(
        60.0,
        ge=0,
        description="Ray Serve: how long a stopping replica lets its in-flight requests finish.",
    )

    # --- production: keys, limits, shutdown, observability -------------------------
    api_key: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="An API key clients must send as 'Authorization: Bearer <key>' (else 401); "
        "repeat the flag for several keys, or give them comma-separated in OAI_API_KEY.",
    )
    api_keys_file: Path | None = Field(
        None,
        description="A file of API keys, one per line ('#' starts a comment), added to "
        "--api-key (a mounted Kubernetes Secret, say).",
    )
    admin_api_key: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="An admin key: accepted as --api-key is, and the only kind the Usage API "
        "(/v1/organization/usage/...) answers (others get 403); repeat the flag for several, "
        "or give them comma-separated in OAI_ADMIN_API_KEY.",
    )
    secret_key: str | None = Field(
        None,
        min_length=16,  # oai_server.secret.MIN_LENGTH
        description="The deployment's secret: keys the API-key ids of logs, metrics and the "
        "Usage API (HMAC) and the encrypted reasoning of 'reasoning.encrypted_content' "
        "(AES-GCM); replicas behind one gateway must share it. Unset: generated on the first "
        "start and kept in --data-dir/secret (mode 0600).",
    )
    rate_limit_rpm: int | None = Field(
        None, ge=1, description="Requests per key per window (default: no limit); over it, 429."
    )
    rate_limit_tpm: int | None = Field(
        None,
        ge=1,
        description="Tokens per key per window: prompt tokens plus the requested maximum, "
        "settled against what was generated (default: no limit); over it, 429.",
    )
    rate_limit_window: float = Field(
        60.0, gt=0, description="Seconds of the rate-limit window (a minute: RPM and TPM)."
    )
    redis_url: str | None = Field(
        None,
        description="The Redis every replica shares, e.g. redis://redis:6379/0: the rate-limit "
        "counters live there, and so does the response cache with --response-cache redis "
        "(a feature given its own redis:// URL uses that instead); default: none, each "
        "process counts alone.",
    )
    drain_timeout: float = Field(
        30.0,
        ge=0,
        description="On SIGTERM: seconds requests in flight may take to finish before they "
        "are aborted (meanwhile /health and new requests answer 503).",
    )
    cors_allow_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Origins allowed by CORS (repeat, or comma-separated; '*' for any); "
        "default: none, CORS off.",
    )
    cors_allow_methods: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["*"],
        description="Methods allowed by CORS (repeat, or comma-separated); default: any.",
    )
    cors_allow_headers: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["*"],
        description="Request headers allowed by CORS (repeat, or comma-separated); default: any.",
    )
    cors_allow_credentials: bool = Field(
        False, description="CORS: let browsers send cookies and credentials."
    )
    prefix_cache_shared: bool = Field(
        False,
        description="Let requests of different API keys share the engine's prefix cache (by "
        "default each key's prompts are salted apart: a shared cache lets one key time "
        "another's prompts). Say so when every key is one tenant.",
    )
    log_request_text: bool = Field(
        False,
        description="Put prompts in the access log and in trace spans (default: counts only, "
        "never text).",
    )
    otlp_traces_endpoint: str | None = Field(
        None,
        description="Export OpenTelemetry traces to this OTLP endpoint (as vllm serve's flag), "
        "e.g. http://collector:4317 (gRPC) or, with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="
        "http/protobuf, http://collector:4318/v1/traces; the standard OTEL_* variables set "
        "headers, service name and sampler. Default: none, tracing off.",
    )
    max_log_len: int | None = Field(
        None,
        ge=0,
        description="Most characters of a prompt the access log shows with "
        "--log-request-text (as vllm serve's request log); unset: all of it.",
    )

    @field_validator(
        "api_key",
        "admin_api_key",
        "cors_allow_origins",
        "cors_allow_methods",
        "cors_allow_headers",
        "lora_modules",
        "model",
        "served_model_name",
        "service_tier_priority_keys",
        mode="before",
    )
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """A list from the environment: comma-separated, or a JSON array (as the chart writes)."""
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                return json.loads(value)
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    # --- response cache (oai_server/cache) --------------------------------------
    response_cache: Literal["off", "redis", "memory"] | str = Field(
        "off",
        description="Answer repeated deterministic requests (temperature 0 or a seed) from a "
        "cache: off, memory (this process), redis (the --redis-url Redis, shared by every "
        "replica), or a redis:// URL of its own.",
    )
    response_cache_ttl: float = Field(3600.0, gt=0, description="Seconds a cached answer is kept.")
    response_cache_max_bytes: int = Field(
        256 * 1024 * 1024,
        gt=0,
        description="Bytes of answers the memory cache holds before evicting the least "
        "recently used.",
    )
    response_cache_shared: bool = Field(
        False,
        description="Share cached answers across API keys (by default each key sees only its own).",
    )

    @field_validator("model")
    @classmethod
    def _model_sources(cls, value: list[str]) -> list[str]:
        """Checked where a user names them: a path with no directory there stops the start."""
        for item in value:
            name, sep, source = item.partition("=")
            if sep and not name:
                raise ValueError(f"{item!r} has no name before '='")
            check_model_source(source if sep else item)
        return value

    @field_validator("vllm_args")
    @classmethod
    def _known_vllm_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Names of vLLM's engine arguments only (checked against vLLM's own parser)."""
        if value:
            from oai_server.engine.vllm.flags import check_engine_values

            check_engine_values(value)
        return value

    @field_validator("reasoning_parser")
    @classmethod
    def _known_reasoning_parser(cls, value: str) -> str:
        """A name of vLLM's reasoning-parser registry (vllm is imported only to check one)."""
        if value not in ("auto", "none"):
            from oai_server.engine.vllm.reasoning import check_reasoning_parser

            check_reasoning_parser(value)
        return value

    @field_validator("tool_parser_plugin")
    @classmethod
    def _import_plugin(cls, value: str | None) -> str | None:
        """The plugin's parsers are registered before --tool-call-parser is checked."""
        if value:
            from oai_server.engine.vllm.parsing import import_tool_parser_plugin

            import_tool_parser_plugin(value)
        return value

    @field_validator("tool_call_parser")
    @classmethod
    def _known_tool_call_parser(cls, value: str) -> str:
        return check_tool_call_parser(value)

    @field_validator("embedding_model")
    @classmethod
    def _model_source(cls, value: str) -> str:
        return check_model_source(value)

    @field_validator("response_cache")
    @classmethod
    def _cache_backend(cls, value: str) -> str:
        if value in ("off", "memory", "redis") or value.startswith(
            ("redis://", "rediss://", "unix://")
        ):
            return value
        raise ValueError("must be 'off', 'memory', 'redis' or a redis:// URL")

    @model_validator(mode="after")
    def _cache_redis_named(self) -> Settings:
        if self.response_cache == "redis" and self.redis_url is None:
            raise ValueError("--response-cache redis needs --redis-url")
        return self

    @property
    def response_cache_redis(self) -> str | None:
        """The Redis URL of the response cache: its own, else --redis-url's; None: not Redis."""
        if self.response_cache == "redis":
            return self.redis_url
        if self.response_cache in ("off", "memory"):
            return None
        return self.response_cache

    @property
    def lora_enabled(self) -> bool:
        """Adapters from --lora-dir or loaded at run time need the engine's LoRA too."""
        return super().lora_enabled or self.lora_dir is not None or self.allow_runtime_lora
