"""What a test parametrizes over: the bad endings and the dialects of each protocol.

Literal tables on purpose: they are the public promise of the plugin ("every name here ends a stream
badly in this protocol"), so a change to the chaos server that dropped one must fail a test rather
than quietly shrink every user's parametrization.
"""

from __future__ import annotations

from types import MappingProxyType

#: Faults that end a stream badly without any timeout on the client's side: a strict client must
#: raise on each. (``stalled`` is left out: it needs the client's stall timeout; inject it by name.)
BAD_ENDINGS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "chat": ("truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error", "error_event",
             "http_error", "empty", "tool_call_unterminated"),
    "responses": ("truncated", "no_finish", "cut_mid_frame", "transport_error", "error_event",
                  "http_error", "empty", "tool_call_unterminated"),
    "messages": ("truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error",
                 "error_event", "http_error", "empty", "tool_call_unterminated"),
})

#: Shapes of good streams that real servers send and naive checkers misread, per protocol.
DIALECTS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "chat": ("no_finish_reason", "no_done", "empty_finish_reason", "usage_choices_null"),
    "responses": ("trailing_done",),
    "messages": ("no_done",),
})
