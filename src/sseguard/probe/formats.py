"""How a workload's turns become a request of each protocol, for the probe and the Locust user.

The formats themselves are the protocols' own (``Protocol.format``, in ``contract/<protocol>/request.py``; the
neutral vocabulary is ``contract/request.py``). This module looks them up by name and adds what only a
run needs: reading a user's own ``--body`` file and telling whether it fits the arm's protocol.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sseguard.core._renamed import renamed
from sseguard.core.contract import protocol
from sseguard.core.contract.messages import thinking_budget
from sseguard.core.contract.request import AssistantAnswer, BodySettings, Call, Format, Tool, Turn
from sseguard.core.errors import ConfigError, UsageError
from sseguard.core.verdict import Api

#: The model a request names when neither the arm nor the run names one.
DEFAULT_MODEL = "sseguard-probe"

__all__ = ["AssistantAnswer", "BodySettings", "Call", "Format", "Tool", "Turn", "check_request_body",
           "format_for", "load_body_file", "thinking_budget"]


def format_for(api: str | Api) -> Format:
    """The format of one protocol; an unknown name is a ``ConfigError``."""
    try:
        return protocol(api).format
    except UsageError as exc:
        raise ConfigError(str(exc)) from None


def load_body_file(path: str) -> dict[str, Any]:
    """A user's own request body: a JSON object (its format is checked against each arm's api)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read body file {path}: {exc.strerror or exc}") from None
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"body file {path} is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ConfigError(f"body file {path} must be a JSON object (a request body)")
    return body


def check_request_body(body: Mapping[str, Any], api: str | Api, *, path: str, arm: str | None = None) -> None:
    """A ``ConfigError`` naming the expected format when ``body`` is not a request of ``api``."""
    fmt = format_for(api)
    reason = fmt.misfit(body)
    if reason is not None:
        who = f"arm {arm!r} speaks {fmt.api}" if arm else f"api {fmt.api}"
        raise ConfigError(f"body file {path} does not fit: {reason}; {who} and needs {fmt.expected}")

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Answer": "AssistantAnswer", "Settings": "BodySettings",
                                 "check_body": "check_request_body"})
