"""The one exception hierarchy of sseguard.

Peer misbehaviour (a broken stream, malformed markup) is never an exception inside the core: it becomes
an ``Ending``, a ``Finding`` or a ``MarkupError`` event, because a checker that raised on bad input would
lose exactly the evidence it exists to keep. Exceptions are for *our caller's* mistakes and for the
adapters that must surface a verdict through an exception-shaped API::

    SSEGuardError
     ├── UsageError          the caller misused an object (fed a closed checker, …)
     ├── ConfigError         unusable configuration or arguments (the CLI turns it into exit code 2)
     └── StreamEndedBadly    (sseguard.client) a stream ended badly under the policy; carries the Verdict
"""

from __future__ import annotations


class SSEGuardError(Exception):
    """Base of every exception sseguard raises on purpose."""


class UsageError(SSEGuardError):
    """The caller used an object against its protocol, e.g. ``feed()`` after ``close()``."""


class ConfigError(SSEGuardError):
    """A configuration value, file or argument cannot be used; the message is one line for a human."""
