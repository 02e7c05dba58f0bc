"""``--resume openai-background``: a Responses stream read again from where it broke.

OpenAI's Responses API keeps a response made with ``background: true`` (which requires ``store:
true``) and streams it again on ``GET /responses/{id}?stream=true&starting_after=N``: the events
after sequence number N, exactly as they were made — the server's own continuation, nothing generated
twice. With this dialect the proxy sends every streamed Responses request upstream with
``background: true`` and ``store: true`` (``upstream_request``); when the stream breaks after
``response.created`` reached the client, the continuation is that GET with N the last sequence
number the client got, and the splice forwards its events as they come, numbers continuing.

A request whose client asked ``store: false`` is not changed, and so not continued, unless the
proxy runs with ``--resume-store-ok`` (storing is what the client declined). Not continued either:
a stream whose ``response.created`` never reached the client (there is no id to read it again by;
``--retry`` covers a failure before the first byte), or whose upstream did not run the response in
the background.

A background response goes on upstream when its connection closes, so a stream the client will
not get the rest of — the client went away, or the proxy gave up on it (``--resume-max`` spent, a
reading refused or out of line) — is cancelled: ``POST {base}/responses/{id}/cancel``
(``BackgroundResume.abandoned``), which OpenAI documents for exactly this, so that the upstream stops
generating (and billing) an answer nobody reads. A stream that ended whole is not cancelled; nor is
an attempt that failed before ``response.created`` reached the client (``--retry`` asks again; its
id was never the client's).

Pure (no I/O), like ``resume/chat.py``: the machine asks, the driver (``driver/stream.py``) sends the
GET and the cancel.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from sseguard.proxy.machines.actions import AskContinuation
from sseguard.proxy.resume.chat import ResumeState
from sseguard.proxy.resume.events import EventReader, json_of, leading_comments
from sseguard.proxy.resume.usage import UsageSum


def upstream_request(request_obj: dict[str, Any], store_ok: bool) -> dict[str, Any] | None:
    """The request the upstream gets: the client's, run in the background and stored; None when the
    dialect does not apply to it (the client asked ``store: false`` and ``--resume-store-ok`` is not
    given)."""
    if request_obj.get("store") is False and not store_ok:
        return None
    return {**request_obj, "background": True, "store": True}


class BackgroundResume(ResumeState):
    """One Responses stream's continuation state: the response's id and the last sequence number the
    client got."""

    def __init__(self, request_obj: dict[str, Any], continuations: int) -> None:
        # Nothing is generated twice, so there is no usage to sum: the server's final event reports
        # the one response's (the sum is kept only as the shared state's).
        super().__init__(request_obj, continuations, UsageSum(("input_tokens", "output_tokens")))
        self.response_id: str | None = None
        self.last: int | None = None  # the last sequence number written to the client
        self.blocked = "response.created has not reached the client"
        self.cancelled = False  # the cancel request has been made

    def note(self, data: bytes) -> None:
        for event in self.written(data):
            obj = json_of(event)
            if obj is None:
                continue
            number = obj.get("sequence_number")
            if isinstance(number, int) and not isinstance(number, bool):
                self.last = number
            if obj.get("type") == "response.created" and self.response_id is None:
                response = obj.get("response")
                rid = response.get("id") if isinstance(response, dict) else None
                if not isinstance(rid, str) or not rid:
                    self.blocked = "response.created carried no response id"
                elif response.get("background") is not True:  # type: ignore[union-attr]
                    self.blocked = "the upstream did not run the response in the background"
                else:
                    self.response_id, self.blocked = rid, None

    def why_not(self) -> str | None:
        if self.blocked is None and self.last is None:
            return "no sequence number reached the client"
        return super().why_not()

    def end_attempt(self) -> tuple[dict[str, Any] | None, int]:
        return None, 0  # the stored response goes on: the attempt generated nothing of its own

    def continuation(self) -> AskContinuation:
        assert self.response_id is not None and self.last is not None
        path = (f"responses/{quote(self.response_id, safe='')}?stream=true"
                f"&starting_after={self.last}")
        return AskContinuation(b"", method="GET", path=path)

    def abandoned(self) -> AskContinuation | None:
        """The cancel request for the stored response, once: the client's stream ended without the
        whole answer (the client left, or the proxy gave up), so its generation upstream is
        wasted. None: no response id reached the client, or it was cancelled already."""
        if self.response_id is None or self.cancelled:
            return None
        self.cancelled = True
        return AskContinuation(b"", method="POST",
                               path=f"responses/{quote(self.response_id, safe='')}/cancel")

    def splice(self) -> BackgroundSplice:
        self.spend()
        assert self.last is not None
        return BackgroundSplice(self.last)


class BackgroundSplice:
    """Forwards a stored stream read again after sequence number ``after``: its events as they
    come, but none the client already has; a stream that does not go on at ``after + 1`` is a
    mismatch (``failure``), and nothing of it is forwarded."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.failure: str | None = None
        self._started = False
        self._events = EventReader()

    def feed(self, data: bytes) -> bytes:
        out = []
        for event in self._events.feed(data):
            if self.failure is not None:
                return b""
            obj = json_of(event)
            number = obj.get("sequence_number") if obj is not None else None
            if isinstance(number, int) and not isinstance(number, bool):
                if number <= self.after and not self._started:
                    out.append(leading_comments(event.raw))  # the client has the event
                    continue
                if not self._started and number != self.after + 1:
                    self.failure = (f"the stored response went on at sequence number {number}, "
                                    f"not {self.after + 1}")
                    return b""
                self._started = True
            out.append(event.raw)
        return b"".join(out)

    def close(self) -> bytes:
        rest = self._events.close()
        return b"" if self.failure is not None else rest
