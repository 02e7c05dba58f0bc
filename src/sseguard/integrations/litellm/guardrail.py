"""The LiteLLM proxy guardrail: every streamed answer checked, a bad ending made an error the SDK raises.

LiteLLM (``litellm[proxy]``, 1.108.7 measured) runs a ``CustomGuardrail``'s
``async_post_call_streaming_iterator_hook`` around every stream of a request the guardrail runs on
(``mode: post_call`` with ``default_on: true``: every request). The hook here passes each item on as
it comes (a healthy stream is never held, changed or delayed beyond the check of its frame) and
judges the stream (``judge.HookJudge``) with the protocol's own checker and the policy. When the
stream fails the policy, it ends the client's stream with an error of the route's own kind: it
raises ``StreamJudgedBad``, which LiteLLM writes as that route's error (chat ``data: {"error": …}``,
Responses ``event: response.failed``, Messages ``event: error``, Gemini ``data: {"error": …}``) and
logs as a failed request. On the two routes where that frame alone does not make the SDK raise
(``OWN_FRAME_FIRST``) the protocol's own error frame, the one ``sseguard proxy`` writes, goes out
first. Every stream is recorded (``recorder.py``) when a store is configured.

LiteLLM only picks the hook up when it is defined on the registered class itself, so a subclass of
``SSEGuardGuardrail`` must define it again (calling this one's). ``docs/litellm.md`` has the config,
what each route hands the hook, and what enabling a post-call guardrail changes in LiteLLM.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from litellm.integrations.custom_guardrail import CustomGuardrail

from sseguard.core.contract import api_for_path
from sseguard.core.errors import SSEGuardError
from sseguard.core.policy import GUARD_DEFAULT, Policy
from sseguard.core.verdict import Api
from sseguard.integrations.litellm.judge import HookJudge, Judgement
from sseguard.integrations.litellm.recorder import Recorder, StreamFacts, log
from sseguard.store._base import one_line

#: The routes whose LiteLLM error frame the SDK does not raise on by itself (measured, docs/litellm.md):
#: openai-python raises on a Responses ``error`` event but not on ``response.failed``; google-genai
#: reads ``error.code`` as a number and LiteLLM writes it as a string. There the protocol's own frame
#: (``RelayTable.error_frame``) goes out before LiteLLM's.
OWN_FRAME_FIRST = frozenset({Api.RESPONSES, Api.GEMINI})

#: The status LiteLLM's error frame carries for a stream the guardrail failed: the upstream's answer
#: was bad, as a gateway's 502 says.
STATUS = 502


class StreamJudgedBad(SSEGuardError):
    """Raised into LiteLLM when a stream failed the policy; LiteLLM turns it into the route's error.

    ``message``, ``code`` (the ending or finding that failed), ``type``, ``param`` and ``status_code``
    are the attributes LiteLLM reads to write its error frame; ``judgement`` keeps the verdict.
    """

    def __init__(self, judgement: Judgement) -> None:
        super().__init__(judgement.message)
        self.judgement = judgement
        self.message = judgement.message
        self.code = judgement.failure
        self.type = "upstream_stream_error"
        self.param: str | None = None
        self.status_code = STATUS


class SSEGuardGuardrail(CustomGuardrail):
    """The guardrail LiteLLM's ``config.yaml`` names: ``sseguard.integrations.litellm.SSEGuardGuardrail``.

    Options, as further keys of the guardrail's ``litellm_params``: ``policy`` (a preset, ``agents`` by
    default as for ``sseguard proxy``), ``tolerate`` (endings or findings, comma-separated),
    ``store`` (a SQLite path or a ``postgresql://`` URL for the records), ``markup`` (the tool-call
    markup families to look for in text, ``all`` by default), ``run_id`` (the records' run).
    A bad option stops LiteLLM at startup with a one-line ``ConfigError``.
    """

    def __init__(self, *, policy: str = GUARD_DEFAULT, tolerate: str | None = None,
                 store: str | None = None, markup: str | None = "all", run_id: str | None = None,
                 **kwargs: Any) -> None:
        self.sseguard_policy = Policy.from_spec(policy, tolerate)
        self.sseguard_markup = markup
        self.recorder = Recorder(store, run_id=run_id)
        super().__init__(**kwargs)

    async def async_post_call_streaming_iterator_hook(
            self, user_api_key_dict: Any, response: AsyncIterator[Any],
            request_data: dict[str, Any]) -> AsyncGenerator[Any, None]:
        """Pass every item on as it comes, judge the stream, and end a bad one with an error."""
        path, body = _request_of(user_api_key_dict, request_data)
        api = api_for_path(path) if path else None
        if api is None:  # not a stream of a protocol sseguard knows (text completions, …)
            async for item in response:
                yield item
            return
        judge = HookJudge(api, body, policy=self.sseguard_policy, markup=self.sseguard_markup,
                          done_after_objects=not request_data.get("_litellm_skip_openai_stream_done"))
        model = request_data.get("model")
        facts = StreamFacts(path=path, model=model if isinstance(model, str) else None,
                            started_at=time.time(), prompt_bytes=_size(body),
                            extra={"litellm_call_id": request_data.get("litellm_call_id")})
        started = time.monotonic()
        ended = False
        facts.headers = _upstream_headers(response)  # LiteLLM has them before the first item
        try:
            async for item in response:
                judge.see(item)  # never raises on what a peer sent (the checkers' promise)
                if facts.ttft_ms is None and judge.saw_content:
                    facts.ttft_ms = (time.monotonic() - started) * 1000
                yield item
        except Exception as exc:  # LiteLLM's stream raised: LiteLLM writes its error, we record why
            ended = True
            judgement = judge.close(transport_error=one_line(exc))
            self._record(judge, judgement, facts, started, raised_by="litellm")
            if judgement.failure is not None and api in OWN_FRAME_FIRST:
                yield judgement.frame
            raise
        except (GeneratorExit, asyncio.CancelledError):
            ended = True
            judgement = judge.close(transport_error="client disconnected")
            facts.extra["client_disconnected"] = True
            self._record(judge, judgement, facts, started)
            raise
        finally:
            if not ended:
                judgement = judge.close(provider_finished=_provider_finished(api, response))
                self._record(judge, judgement, facts, started)
        if judgement.failure is None:
            if judgement.completion:
                yield judgement.completion
            return
        if api in OWN_FRAME_FIRST:
            yield judgement.frame
        raise StreamJudgedBad(judgement)

    def _record(self, judge: HookJudge, judgement: Judgement, facts: StreamFacts, started: float,
                raised_by: str | None = None) -> None:
        facts.duration_ms = (time.monotonic() - started) * 1000
        if raised_by is not None:
            facts.extra["raised_by"] = raised_by
        if judge.finish_filled:
            facts.extra["finish_filled_by_litellm"] = True
        if judgement.completion:
            facts.extra["completed_with"] = judgement.completion.decode("utf-8", "replace").strip()
        try:
            self.recorder.record(judgement, facts, policy=self.sseguard_policy)
        except Exception:  # evidence must never take a stream down (a store that cannot be opened)
            log.exception("could not record a stream on %s", facts.path)


def _provider_finished(api: Api, response: object) -> bool | None:
    """Whether the provider itself sent a finish reason on a chat stream (None: not a chat stream,
    or LiteLLM's stream does not say).

    LiteLLM's stream wrapper keeps the provider's chunks in ``chunks`` (the router's wrapper shares
    that list, the proxy's wrappers pass attributes through) and adds its own final chunk there only
    when the provider sent a finish reason: its ``stop`` for a provider that sent none is not in it
    (litellm 1.108.7, ``litellm_core_utils/streaming_handler.py``).
    """
    if api is not Api.CHAT:
        return None
    try:
        chunks = getattr(response, "chunks", None)
    except Exception:  # a wrapper's __getattr__ may raise anything: then we cannot tell
        return None
    if not isinstance(chunks, list):
        return None
    for chunk in chunks:
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "finish_reason", None):
                return True
    return False


def _upstream_headers(response: object) -> dict[str, str]:
    """The upstream's response headers, where LiteLLM's stream keeps them (``_response_headers`` on
    its stream wrappers; the raw-byte routes keep none): the record keeps ids, traces and
    ``x-sseguard-fault`` from them, redacted, as the proxy's records do."""
    try:
        headers = getattr(response, "_response_headers", None)
        items = headers.items() if headers is not None and hasattr(headers, "items") else ()
        return {str(k): str(v) for k, v in items}
    except Exception:  # a wrapper's __getattr__ may raise anything: then there are none to keep
        return {}


def _request_of(user_api_key_dict: Any,
                request_data: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    """The request's path and the client's JSON body, as LiteLLM's proxy keeps them."""
    server_request = request_data.get("proxy_server_request")
    path = ""
    body: Mapping[str, Any] | None = None
    if isinstance(server_request, Mapping):
        url = server_request.get("url")
        if isinstance(url, str):
            path = urlsplit(url).path
        raw = server_request.get("body")
        body = raw if isinstance(raw, Mapping) else None
    if not path:
        route = getattr(user_api_key_dict, "request_route", None)
        path = route if isinstance(route, str) else ""
    return path, body


def _size(body: Mapping[str, Any] | None) -> int:
    """About how large the client's request was (its messages as JSON), for the record."""
    if body is None:
        return 0
    import json

    try:
        return len(json.dumps(body, default=str))
    except (TypeError, ValueError):
        return 0
