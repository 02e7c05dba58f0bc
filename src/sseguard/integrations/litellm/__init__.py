"""A LiteLLM proxy guardrail that ends a badly ended stream with that route's own error.

Enable it in the LiteLLM proxy's ``config.yaml`` (``docs/litellm.md``)::

    guardrails:
      - guardrail_name: sseguard
        litellm_params:
          guardrail: sseguard.integrations.litellm.SSEGuardGuardrail
          mode: post_call
          default_on: true

``SSEGuardGuardrail`` (``guardrail.py``) is the only part that imports LiteLLM, so it is loaded on first
use; ``judge.py`` holds the judging, sans-IO, and ``recorder.py`` writes the records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sseguard._lazy import lazy_names
from sseguard.integrations.litellm.judge import HookJudge, Judgement, wire_bytes

if TYPE_CHECKING:
    from sseguard.integrations.litellm.guardrail import SSEGuardGuardrail, StreamJudgedBad

__all__ = ["HookJudge", "Judgement", "SSEGuardGuardrail", "StreamJudgedBad", "wire_bytes"]


#: LiteLLM is imported only when its guardrail class is asked for (LiteLLM's config loader does).
__getattr__ = lazy_names(__name__, {"SSEGuardGuardrail": "guardrail", "StreamJudgedBad": "guardrail"})
