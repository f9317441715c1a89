"""The environment a tool process gets: acagent's own environment minus its secrets (F43).

Every process acagent spawns for a tool (the ``shell`` tool; MCP stdio servers may apply it on
top of their own minimal set) takes its environment from :func:`scrubbed_env`, the one rule:

* **removed**: every ``ACAGENT_*`` variable (daemon token, data dir, test hooks: a tool has no
  business talking to acagent's daemon or journal), every name ending in ``_API_KEY``, ``_APIKEY``
  or ``_SECRET_KEY`` or ``_ACCESS_KEY`` (any provider's key, ``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ...), the tokens of known model providers
  (:data:`PROVIDER_TOKEN_PREFIXES` + a name ending in ``_TOKEN``/``_AUTH_TOKEN``/``_KEY``:
  ``ANTHROPIC_AUTH_TOKEN``, ``HF_TOKEN``, ``REPLICATE_API_TOKEN``, ...), the exact names in
  :data:`SECRET_NAMES` (``OTEL_EXPORTER_OTLP_HEADERS`` may carry an auth header), and any variable
  whose value contains one of the ``secrets`` values passed in (the configured provider keys,
  the daemon token), whatever its name;
* **kept**: everything else (``PATH``, ``HOME``, ``VIRTUAL_ENV``, ``GITHUB_TOKEN``, ...): the
  user's tools need their environment, and a credential that is not acagent's own is the
  user's to hand to the commands they approve.

Names are compared case-insensitively.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["PROVIDER_TOKEN_PREFIXES", "SECRET_NAMES", "is_secret_name", "scrubbed_env", "secret_values"]

PROVIDER_TOKEN_PREFIXES = (
    "OPENAI", "ANTHROPIC", "CLAUDE", "AZURE_OPENAI", "GEMINI", "GOOGLE_AI", "VERTEX", "MISTRAL",
    "GROQ", "DEEPSEEK", "OPENROUTER", "TOGETHER", "XAI", "COHERE", "FIREWORKS", "PERPLEXITY",
    "REPLICATE", "HF", "HUGGINGFACE", "HUGGING_FACE", "HUGGING_FACE_HUB", "OLLAMA", "CEREBRAS",
    "SAMBANOVA", "NVIDIA", "VOYAGE", "LITELLM", "AWS_BEARER_TOKEN_BEDROCK",
)  # fmt: skip
"""Model-provider prefixes whose ``*_TOKEN`` / ``*_KEY`` variables are removed."""

SECRET_NAMES = frozenset(
    {"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "AWS_BEARER_TOKEN_BEDROCK"}
)
"""Exact names removed besides the patterns."""

_KEY_SUFFIXES = ("_API_KEY", "_APIKEY", "_SECRET_KEY", "_ACCESS_KEY")
_TOKEN_SUFFIXES = ("_TOKEN", "_AUTH_TOKEN", "_KEY", "_API_TOKEN", "_ACCESS_TOKEN")
_MIN_SECRET_CHARS = 8
"""Shorter ``secrets`` values are ignored (they would match ordinary values by accident)."""


def is_secret_name(name: str) -> bool:
    """True if a variable of this name never reaches a tool process (rule above)."""
    upper = name.upper()
    if upper.startswith("ACAGENT_") or upper in SECRET_NAMES or upper.endswith(_KEY_SUFFIXES):
        return True
    return any(
        upper.startswith(prefix + "_") and upper.endswith(_TOKEN_SUFFIXES)
        for prefix in PROVIDER_TOKEN_PREFIXES
    )


def scrubbed_env(environ: Mapping[str, str] | None = None, secrets: Iterable[str] = ()) -> dict[str, str]:
    """The environment for a tool process: ``environ`` without acagent's secrets (and, for this
    process's own environment, without what ``acagent/_entry.py`` set for acagent alone).

    Args:
        environ: the environment to start from (default: this process's ``os.environ``).
        secrets: secret values (configured API keys, the daemon token); a variable whose value
            contains one is removed whatever its name. Values shorter than 8 characters are
            ignored.

    Returns:
        A new dict (``environ`` is not changed).
    """
    from acagent._entry import ADDED_ENV  # set for acagent's own process only

    source = os.environ if environ is None else environ
    values = [s for s in secrets if s and len(s) >= _MIN_SECRET_CHARS]
    return {
        name: value
        for name, value in source.items()
        if not is_secret_name(name)
        and not any(secret in value for secret in values)
        and (environ is not None or name not in ADDED_ENV)
    }


def secret_values(home: Path, keys: Iterable[str | None] = ()) -> tuple[str, ...]:
    """The ``secrets`` for :func:`scrubbed_env`: the configured keys plus the daemon token.

    Args:
        home: the data dir (``ACAGENT_HOME``); its ``token`` file is read if it exists.
        keys: configured provider keys (None entries are skipped).
    """
    out = [k for k in keys if k]
    try:
        token = (home / "token").read_text().strip()
    except (OSError, UnicodeDecodeError):
        token = ""
    if token:
        out.append(token)
    return tuple(out)
