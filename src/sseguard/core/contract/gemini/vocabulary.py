"""Gemini's words (``contract.vocabulary``): its finish and prompt-block reasons in three classes,
and the part fields its checker knows. Every consumer reads them through ``GEMINI``.

The classes follow the ``FinishReason`` docs of the API: the safety-type stops are the provider's
policy (passed on as they came); ``OTHER``, the malformed and unexpected calls, a missing thought
signature and an image that never came are the model failing; ``CONTINUATION`` is a per-request
token limit the client continues past, as ``MAX_TOKENS``.
"""

from __future__ import annotations

from sseguard.core.contract.vocabulary import Kinds, ReasonClass, Reasons

_F, _P, _X = ReasonClass.FINISHED, ReasonClass.POLICY, ReasonClass.FAILED

REASONS = Reasons(
    {
        "STOP": _F,
        "MAX_TOKENS": _F,
        "CONTINUATION": _F,
        "SAFETY": _P,
        "RECITATION": _P,
        "LANGUAGE": _P,
        "BLOCKLIST": _P,
        "PROHIBITED_CONTENT": _P,
        "SPII": _P,
        "IMAGE_SAFETY": _P,
        "IMAGE_PROHIBITED_CONTENT": _P,
        "IMAGE_RECITATION": _P,
        "ESCALATION": _P,
        "PUP_LIMITED_DISABLED": _P,
        "MODEL_ARMOR": _P,
        "FINISH_REASON_UNSPECIFIED": _X,
        "OTHER": _X,
        "MALFORMED_FUNCTION_CALL": _X,
        "UNEXPECTED_TOOL_CALL": _X,
        "TOO_MANY_TOOL_CALLS": _X,
        "MISSING_THOUGHT_SIGNATURE": _X,
        "MALFORMED_RESPONSE": _X,
        "IMAGE_OTHER": _X,
        "NO_IMAGE": _X,
    },
    # ``promptFeedback.blockReason``: the prompt itself was refused, by policy, whatever the rule.
    blocked={
        "SAFETY": _P,
        "OTHER": _P,
        "BLOCKLIST": _P,
        "PROHIBITED_CONTENT": _P,
        "IMAGE_SAFETY": _P,
        "MODEL_ARMOR": _P,
        "JAILBREAK": _P,
        "BLOCKED_REASON_UNSPECIFIED": _X,
    },
)

KINDS = Kinds(
    # The fields of a ``Part`` (google-genai's ``types.Part``, in the API's camel case).
    blocks=frozenset({
        "text", "thought", "thoughtSignature", "functionCall", "functionResponse", "inlineData",
        "fileData", "executableCode", "codeExecutionResult", "videoMetadata", "mediaResolution",
        "toolCall", "toolResponse", "partMetadata", "audioTranscription", "mediaProcessing",
        "speechMetadata", "documentMetadata", "spreadsheetMetadata", "audioMetadata",
    }),
    # The fields of a streamed ``functionCall`` piece.
    deltas=frozenset({"id", "name", "args", "partialArgs", "willContinue"}),
)
