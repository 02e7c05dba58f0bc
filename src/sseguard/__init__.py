"""sseguard: make streamed LLM responses trustworthy.

The sans-IO core (``sseguard.core``: ``sse``, ``contract``, ``policy``, ``record``, ``redact``,
``toolcalls``, ``reasoning``, …) imports no I/O library; the adapters (``chaos``, ``probe``,
``analyze``, ``proxy``, ``store``, ``client``, ``locust``) sit on top of it. See
docs/design/architecture.md for the layers. The core's old paths (``sseguard.errors``, …) still import,
with a ``DeprecationWarning`` (``sseguard._moved``).
"""

from typing import TYPE_CHECKING

from sseguard import _moved
from sseguard.core.errors import ConfigError, SSEGuardError, UsageError
from sseguard.core.policy import Policy
from sseguard.core.verdict import Ending, Finding, FindingKind, Verdict

if TYPE_CHECKING:
    from sseguard.client import StreamEndedBadly

_moved.install()

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # StreamEndedBadly lives with the httpx2 transports; importing it lazily keeps `import sseguard`
    # (and the sans-IO core) free of any HTTP library.
    if name == "StreamEndedBadly":
        from sseguard.client import StreamEndedBadly

        return StreamEndedBadly
    raise AttributeError(f"module 'sseguard' has no attribute {name!r}")

__all__ = [
    "ConfigError",
    "Ending",
    "Finding",
    "FindingKind",
    "Policy",
    "SSEGuardError",
    "StreamEndedBadly",
    "UsageError",
    "Verdict",
    "__version__",
]
