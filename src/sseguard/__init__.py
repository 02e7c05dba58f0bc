"""sseguard: make streamed LLM responses trustworthy.

The sans-IO core (``sse``, ``assemble``, ``contract``, ``policy``, ``record``, ``redact``, ``toolcalls``,
``reasoning``) imports no I/O library; the adapters (``chaos``, ``probe``, ``analyze``, ``proxy``,
``store``, ``client``, ``locust``) sit on top of it. See DESIGN.md for the layers.
"""

from sseguard.errors import ConfigError, SSEGuardError, UsageError
from sseguard.policy import Policy
from sseguard.verdict import Ending, Finding, FindingKind, Verdict

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Ending",
    "Finding",
    "FindingKind",
    "Policy",
    "SSEGuardError",
    "UsageError",
    "Verdict",
    "__version__",
]
