"""What the relay needs to know about each streaming protocol: one engine (``stream.py``), one table each.

The tables are the protocols' own (``Protocol.relay`` in ``contract/<protocol>.py``): which event is
terminal, which upstream error frames the SDK already raises on, what error frame to send, the
sentinel ``--complete-done`` appends. ``PROTOCOLS.md`` ("What a guard sends") fixes the frames, verified
against the official SDKs. This module only gives the relay its names for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sseguard.contract import Relay, UpstreamError, protocols
from sseguard.verdict import Api

#: One protocol's table for the relay (the descriptor's ``relay``).
Wire = Relay

#: Every protocol's relay table, by ``Api``: the relay looks the stream's protocol up here.
WIRES: Mapping[Api, Wire] = MappingProxyType({p.api: p.relay for p in protocols()})

__all__ = ["WIRES", "UpstreamError", "Wire"]
