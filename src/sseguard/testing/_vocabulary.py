"""What a test parametrizes over: the bad endings and the dialects of each protocol.

Read from the protocol registry (each descriptor's ``bad_endings`` and ``dialects``), so a new protocol
is parametrized over without an edit here. The plugin's own tests keep the literal tables: they are
the public promise ("every name here ends a stream badly in this protocol"), so a descriptor or chaos
change that dropped one fails a test rather than quietly shrinking every user's parametrization.
"""

from __future__ import annotations

from types import MappingProxyType

from sseguard.core.contract import protocols

#: Faults that end a stream badly without any timeout on the client's side: a strict client must
#: raise on each. (``stalled`` is left out: it needs the client's stall timeout; inject it by name.)
BAD_ENDINGS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {str(p.api): p.bad_endings for p in protocols()})

#: Shapes of good streams that real servers send and naive checkers misread, per protocol.
DIALECTS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {str(p.api): p.dialects for p in protocols()})
