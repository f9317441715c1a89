"""One settings object, built once in the CLI and passed down.

Sources, highest first: command-line flags, ``ACAGENT_*`` environment variables (and the
provider variables ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``,
``ANTHROPIC_BASE_URL``), the config file ``$ACAGENT_HOME/config.toml``, defaults. Nothing below
the CLI reads ``os.environ``: :func:`load_settings` is the only place that does.

The timing constants are validated against each other (:meth:`Timing.check`), so a lease can
never expire while its holder is still renewing on schedule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from acagent.config_errors import config_error
from acagent.errors import ConfigError
from acagent.usage._caps import Limits

__all__ = [
    "ContextSettings",
    "PriceOverride",
    "ProviderSettings",
    "Settings",
    "Timing",
    "default_home",
    "load_settings",
]


class Timing(BaseModel):
    """Timing constants, in seconds unless the name says otherwise: durations > 0, delays >= 0 (a
    negative renew interval was a busy loop of renewals, a zero tool timeout killed every command)."""

    model_config = ConfigDict(extra="forbid")

    lease_ttl_s: float = Field(default=30.0, gt=0)
    """How long a session lease is valid without renewal."""
    lease_renew_s: float = Field(default=10.0, gt=0)
    """Interval between lease renewals; must be < lease_ttl_s / 2."""
    llm_timeout_s: float = Field(default=300.0, gt=0)
    """Maximum duration of one LLM call (connect to last byte)."""
    llm_idle_timeout_s: float = Field(default=120.0, gt=0)
    """Maximum silence between two stream chunks (stall detection); must be < llm_timeout_s.

    (A step inflight without a live owner is reclaimed through the session lease: when it expires
    after ``lease_ttl_s`` without renewal, or at once when the holder's pid is dead.)"""
    tool_timeout_s: float = Field(default=600.0, gt=0)
    """Default shell tool timeout."""
    tool_redelivery_idle_s: float = Field(default=630.0, gt=0)
    """The run lease of a tool call (``tool_call.run_expires_at`` = start + this): recovery trusts
    the recorded process group only until it expires (afterwards the pgid may have been reused, and
    only the spawn marker identifies the call's processes); must be > tool_timeout_s."""
    tool_kill_grace_s: float = Field(default=2.0, ge=0)
    """Grace period between SIGTERM and SIGKILL of a tool's process group."""
    step_max_attempts: int = 3
    """Maximum attempts of one LLM step (transient errors and crash recovery), then the turn fails."""
    retry_base_delay_s: float = Field(default=0.5, ge=0)
    """First retry delay; doubles per attempt (with jitter), capped at retry_max_delay_s."""
    retry_max_delay_s: float = Field(default=20.0, ge=0)
    approval_timeout_s: float | None = Field(default=None, gt=0)
    """Seconds an approval may stay unanswered before it resolves as timed out; None = forever."""
    busy_timeout_ms: int = 10000
    """SQLite busy_timeout per connection, in milliseconds (>= 5000)."""
    journal_full_wait_s: float | None = Field(default=None, ge=0)
    """How long a turn's commits wait for space when the journal's disk is full, retrying, before
    the turn stops (``runner/_writer.py``); must be < lease_ttl_s - lease_renew_s (within the lease).
    None: :attr:`full_disk_wait_s` derives it (10 s with the default lease)."""

    def check(self) -> Timing:
        """Validate the relations between constants.

        Raises:
            ConfigError: naming the violated relation.
        """
        rules = [
            (self.lease_renew_s < self.lease_ttl_s / 2, "lease_renew_s < lease_ttl_s / 2"),
            (self.tool_redelivery_idle_s > self.tool_timeout_s, "tool_redelivery_idle_s > tool_timeout_s"),
            (self.llm_idle_timeout_s < self.llm_timeout_s, "llm_idle_timeout_s < llm_timeout_s"),
            (self.step_max_attempts >= 1, "step_max_attempts >= 1"),
            (self.busy_timeout_ms >= 5000, "busy_timeout_ms >= 5000"),
            (
                self.journal_full_wait_s is None
                or self.journal_full_wait_s < self.lease_ttl_s - self.lease_renew_s,
                "journal_full_wait_s < lease_ttl_s - lease_renew_s",
            ),
        ]
        for ok, relation in rules:
            if not ok:
                values = ", ".join(f"{name} = {getattr(self, name):g}" for name in _names(relation))
                raise ConfigError(
                    f"invalid config [timing]: {relation} must hold ({values})", detail={"relation": relation}
                )
        return self

    @property
    def full_disk_wait_s(self) -> float:
        """``journal_full_wait_s``, or when unset half the time a lease outlives its last renewal
        (``(lease_ttl_s - lease_renew_s) / 2``), at most 10 s."""
        if self.journal_full_wait_s is not None:
            return self.journal_full_wait_s
        return min(10.0, max(0.0, self.lease_ttl_s - self.lease_renew_s) / 2)


def _names(relation: str) -> list[str]:
    """The setting names in a relation such as ``lease_renew_s < lease_ttl_s / 2``."""
    return [word for word in relation.split() if word in Timing.model_fields]


class ContextSettings(BaseModel):
    """``[context]``: when and how the model context is compacted (docs/context.md)."""

    model_config = ConfigDict(extra="forbid")

    compact_at: float = Field(default=0.8, gt=0.05, le=1.0)
    """Compact when the next request is estimated above this fraction of the context window."""
    keep_recent: float = Field(default=0.35, gt=0.0, lt=0.9)
    """Most recent turns kept verbatim: at most this fraction of the window (the current turn always)."""
    auto: bool = True
    """False: compact only on request (``/compact``, ``acagent compact``, the HTTP route)."""


class PriceOverride(BaseModel):
    """``[pricing."PROVIDER:NAME"]``: USD per million tokens (finite, not negative)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    input_usd_per_mtok: float = Field(ge=0)
    output_usd_per_mtok: float = Field(ge=0)
    cached_input_usd_per_mtok: float | None = Field(default=None, ge=0)


class ProviderSettings(BaseModel):
    """Endpoint settings for the providers (from flags, env and the config file)."""

    model_config = ConfigDict(extra="forbid")

    openai_api_key: str | None = None
    openai_base_url: str | None = None
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    ollama_base_url: str = "http://127.0.0.1:11434/v1"
    base_url: str | None = None
    """``--base-url``: overrides the chosen provider's base URL."""
    local_threads: int | None = None
    """Threads for the embedded local model; default max(1, min(4, cpu_count - 1))."""
    local_model_path: str | None = None

    @field_validator("openai_api_key", "anthropic_api_key")
    @classmethod
    def _check_key(cls, value: str | None) -> str | None:
        """A key goes into an HTTP header: white space around it (a pasted line break) is dropped,
        a character inside it that is not printable ASCII is refused (F120: a CR LF in the key
        added a header to every provider request; a non-Latin-1 one failed each turn)."""
        if value is None:
            return None
        key = value.strip()
        for i, ch in enumerate(key):
            if not "\x21" <= ch <= "\x7e":
                what = "a space" if ch.isspace() and ch.isprintable() else f"U+{ord(ch):04X}"
                raise ValueError(
                    f"character {i + 1} of the key is {what}: an API key is printable ASCII without "
                    "spaces or line breaks; copy it again"
                )
        return key or None


class Settings(BaseModel):
    """Everything a command needs, resolved once."""

    model_config = ConfigDict(extra="forbid")

    home: Path
    """Data directory (``ACAGENT_HOME``): journal, transcripts, daemon state, model cache."""
    model: str | None = None
    """``PROVIDER:MODEL``; None means resolve (config → keys → local)."""
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    timing: Timing = Field(default_factory=Timing)
    durability: Literal["normal", "full"] = "normal"
    """SQLite ``synchronous`` level: normal survives a killed process, full a power cut."""
    auto_approve: bool = False
    """``--yes``: run tools without asking."""
    tools: Literal["auto", "on", "off"] = "auto"
    """Offer tools to the model: auto = on except for the embedded local model."""
    max_sessions: int = 16
    """Maximum sessions running a turn at once in one process (→ concurrency_cap)."""
    checkpoint_ratio: float = 0.5
    """No effect since checkpoints became incremental (the journal's context events are the
    increment; only compaction writes a full snapshot): kept so older config files still load."""
    system_prompt: str | None = None
    tool_output_limit_chars: int = Field(default=30_000, ge=1000)
    """Most characters of one tool output the model gets and the terminal shows (head + tail);
    a longer output is kept in full in a blob beside the transcript (F44)."""
    shell_allow: list[str] = Field(default_factory=list)
    """Programs the shell tool may run without approval (same rule as an ``always`` answer)."""
    crash_at: str | None = None
    """``ACAGENT_CRASH_AT``: test-only crash point name."""
    journal: str | None = None
    """Journal URL (``--journal``, ``ACAGENT_JOURNAL_URL``, config ``journal``): ``postgresql://…``
    selects the shared PostgreSQL journal (docs/scale-out.md); unset = SQLite in ``$ACAGENT_HOME``."""
    daemon_id: str | None = None
    """This daemon's id in a PostgreSQL cluster (``--daemon-id``; default ``host:port``)."""
    tracing: bool = False
    """OpenTelemetry export on: the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``…_TRACES_ENDPOINT``) is set."""
    trace_content: bool = False
    """Message text and tool input/output in spans (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``)."""
    limits: Limits = Field(default_factory=Limits)
    """``[limits]``: spend, token and turn caps (docs/limits.md)."""
    context: ContextSettings = Field(default_factory=ContextSettings)
    """``[context]``: compaction."""
    models: dict[str, dict[Literal["context_window", "max_output_tokens"], PositiveInt]] = Field(
        default_factory=dict
    )
    """``[models."PROVIDER:NAME"]``: ``context_window`` and ``max_output_tokens`` in tokens."""
    pricing: dict[str, PriceOverride] = Field(default_factory=dict)
    """``[pricing."PROVIDER:NAME"]``: USD per million tokens, overriding the packaged price table."""
    mcp: dict[str, Any] = Field(default_factory=dict)
    """The ``[mcp]`` table of config.toml (``servers.NAME``), validated by ``acagent.mcp``."""

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str | None) -> str | None:
        if value is not None:
            from acagent.providers._registry import model_id_problem

            problem = model_id_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("journal")
    @classmethod
    def _check_journal(cls, value: str | None) -> str | None:
        if value and value.split("://", 1)[0] not in ("postgresql", "postgres"):
            raise ValueError("not a postgresql:// URL; unset it to use SQLite in ACAGENT_HOME")
        return value

    @model_validator(mode="after")
    def _check_timing(self) -> Settings:
        self.timing.check()
        return self

    @property
    def db_path(self) -> Path:
        """``$ACAGENT_HOME/acagent.db``."""
        return self.home / "acagent.db"

    @property
    def sessions_dir(self) -> Path:
        """``$ACAGENT_HOME/sessions`` (transcripts, bucketed by cwd)."""
        return self.home / "sessions"


def default_home() -> Path:
    """The platformdirs user data dir for acagent."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("acagent", appauthor=False))


_ENV_TIMING_PREFIX = "ACAGENT_TIMING_"


def load_settings(
    overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Build :class:`Settings` from flags (``overrides``), the environment and the config file.

    Args:
        overrides: values from command-line flags; ``None`` values are ignored. Keys are
            Settings fields, plus ``base_url``.
        env: the environment (default ``os.environ``).

    Raises:
        ConfigError: the config file does not parse, or a value is invalid.
    """
    env = os.environ if env is None else env
    over = {k: v for k, v in (overrides or {}).items() if v is not None}
    home = Path(over.pop("home", None) or env.get("ACAGENT_HOME") or default_home()).expanduser()
    config: dict[str, Any] = {}
    cfg_path = home / "config.toml"
    if cfg_path.exists():
        import tomllib  # only with a config file (its import is ~2 ms of a one-shot run without one)

        try:
            config = tomllib.loads(cfg_path.read_text())
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config file {str(cfg_path)!r}: {exc}") from exc
    in_file = dict(config)  # what the file set (an error names its line only for these)
    providers: dict[str, Any] = dict(config.pop("providers", {}) or {})
    timing: dict[str, Any] = dict(config.pop("timing", {}) or {})
    sources: dict[str, str] = {}  # key path → the environment variable that set it
    for key, var in [
        ("openai_api_key", "OPENAI_API_KEY"),
        ("openai_base_url", "OPENAI_BASE_URL"),
        ("anthropic_api_key", "ANTHROPIC_API_KEY"),
        ("anthropic_base_url", "ANTHROPIC_BASE_URL"),
        ("local_threads", "ACAGENT_LOCAL_THREADS"),
    ]:
        if env.get(var):
            providers[key] = env[var]
            sources[f"providers.{key}"] = var
    if "base_url" in over:
        providers["base_url"] = over.pop("base_url")
    for var, value in env.items():
        if var.startswith(_ENV_TIMING_PREFIX):
            timing[var[len(_ENV_TIMING_PREFIX) :].lower()] = value
            sources[f"timing.{var[len(_ENV_TIMING_PREFIX) :].lower()}"] = var
    data: dict[str, Any] = {**config, "home": home, "providers": providers, "timing": timing}
    for key, var in [
        ("model", "ACAGENT_MODEL"),
        ("crash_at", "ACAGENT_CRASH_AT"),
        ("durability", "ACAGENT_DURABILITY"),
        ("journal", "ACAGENT_JOURNAL_URL"),
        ("max_sessions", "ACAGENT_MAX_SESSIONS"),
    ]:
        if env.get(var):
            data[key] = env[var]
            sources[key] = var
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        data["tracing"] = True
        content = env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
        data["trace_content"] = content.strip().lower() in ("1", "true", "yes")
    cfg_limits = data.get("limits")
    if (
        isinstance(cfg_limits, dict)
        and cfg_limits.get("max_sessions") is not None
        and "max_sessions" not in data
    ):
        data["max_sessions"] = cfg_limits["max_sessions"]  # [limits] max_sessions = the instance cap
    data.update(over)
    sources.update({key: f"--{key.replace('_', '-')}" for key in over})
    if "mcp" in config:
        from acagent.mcp._config import parse_mcp_table  # the [mcp] table, by the same rule

        parse_mcp_table(config.get("mcp"), cfg_path)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise config_error(
            exc,
            path=cfg_path if in_file else None,
            in_file=in_file,
            sources=sources,
            top_keys=Settings.model_fields,
        ) from None
