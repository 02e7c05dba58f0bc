"""The three wire protocols the chaos upstream speaks, as one table the server reads.

The server has one handler: it decides, generates the answer (protocol-independent) and asks the
request's ``Wire`` to parse the request, render the answer, and shape errors. Adding a protocol is one
module with those functions and one row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sseguard.chaos import messages, responses
from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.frames import Plan, ResponseIds, completion_body, error_object, stream_plan
from sseguard.chaos.generate import Answer
from sseguard.chaos.request import BadRequest, ChatRequest, openai_bad_request, parse_request
from sseguard.verdict import Api


@dataclass(frozen=True, slots=True)
class Wire:
    """What differs between the protocols, for the server's one handler."""

    api: Api
    path: str
    parse: Callable[[bytes], ChatRequest]
    stream_plan: Callable[[ChaosConfig, ChatRequest, Decision, ResponseIds, list[Answer]], Plan]
    body: Callable[[ChaosConfig, ChatRequest, Decision, ResponseIds, list[Answer]], bytes]
    error_body: Callable[[int, str], dict[str, Any]]
    bad_request_body: Callable[[BadRequest], dict[str, Any]]
    id_prefix: str | None  # the default route's id prefix; None: the configured ``id_prefix``
    unsupported: frozenset[Fault]  # faults this protocol cannot carry (skipped, as inapplicable)
    unsupported_unstreamed: frozenset[Fault] = frozenset()

    def cannot_carry(self, *, stream: bool) -> frozenset[Fault]:
        """The faults a request of this protocol cannot carry, streamed or not."""
        return self.unsupported if stream else self.unsupported | self.unsupported_unstreamed


#: Chat has no sequence numbers, items or blocks: the four Responses/Messages faults are skipped.
CHAT_UNSUPPORTED = frozenset({Fault.SEQUENCE_GAP, Fault.EVENT_ORDER, Fault.BLOCK_UNTERMINATED,
                              Fault.DONE_MISMATCH})

WIRES: tuple[Wire, ...] = (
    Wire(Api.CHAT, "/v1/chat/completions", parse_request, stream_plan, completion_body,
         error_object, openai_bad_request, None, CHAT_UNSUPPORTED),
    Wire(Api.RESPONSES, "/v1/responses", responses.parse_request, responses.stream_plan,
         responses.response_body, error_object, openai_bad_request, responses.ID_PREFIX,
         responses.UNSUPPORTED),
    Wire(Api.MESSAGES, "/v1/messages", messages.parse_request, messages.stream_plan,
         messages.message_body, messages.error_body, messages.bad_request_body, messages.ID_PREFIX,
         messages.UNSUPPORTED, messages.UNSUPPORTED_UNSTREAMED),
)
