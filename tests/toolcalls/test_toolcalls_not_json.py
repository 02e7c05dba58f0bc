"""One fault, one error kind: what each family with no closer (docs/design/markup.md decision 3.8)
reports when the body after its marker is not what its grammar says (docs/markup.md, "When the body is not
JSON"). The rule, written once:

- the marker opens a *container* of calls (Granite's, Phi-4-mini's, pre-v11 Mistral's, xLAM's array)
  and something else follows: ``malformed_tag`` — not this format. A JSON value standing there is
  read whole into the error (nothing of it is visible); other text is not delimited by anything, so
  the marker alone is the error and the text stays text;
- a *call's own JSON* is due (an array element, the object after Granite-20B-FC's or GigaChat 3's
  marker, Llama 3's objects, Mistral v11's arguments) and what stands there is no call object —
  another JSON value, or text that is no JSON — : ``bad_param_json``, once, for that element
  (an element runs to the ``,`` or ``]`` that ends it);
- junk *between* elements, where ``,`` or ``]`` is due: ``malformed_tag``, the rest of the array void.

Each case runs whole and in every chunking (``check_case``). Before issue 50, 15 of these cases
gave another kind, two kinds, or the value as visible text.
"""

from __future__ import annotations

from typing import Any

import pytest

from support.toolcalls_tables import check_case

Case = tuple[str, str, list[tuple[str, Any]], list[str]]

CASES: dict[str, list[Case]] = {
    "granite": [
        # an object where the array is due: not this format, nothing of it visible
        ('<tool_call>{"name": "f", "arguments": {}} after', " after", [], ["malformed_tag"]),
        ('<|tool_call|>{"name": "f", "arguments": {"s": "}"}}', "", [], ["malformed_tag"]),
        ('<tool_call>"a string" after', " after", [], ["malformed_tag"]),
        # prose after the marker: nothing delimits it, the marker alone is the error
        ("<tool_call> hello", "hello", [], ["malformed_tag"]),
        # inside the array, an element that is no JSON: one bad_param_json
        ("<tool_call>[hello]", "", [], ["bad_param_json"]),
        ('<tool_call>[hello, {"name": "f", "arguments": {}}] ok', " ok", [("f", {})],
         ["bad_param_json"]),
    ],
    "granite-20b-fc": [
        # an array where the call object is due: that one element is no call
        ('<function_call> [{"name": "f", "arguments": {}}] after', " after", [],
         ["bad_param_json"]),
        ('<function_call> "f" after', " after", [], ["bad_param_json"]),
        ("<function_call> {not json}", "", [], ["bad_param_json"]),
        ("<function_call> hello", "hello", [], ["malformed_tag"]),
    ],
    "gigachat3": [
        ("<|function_call|>[1] after", " after", [], ["bad_param_json"]),
        ("<|function_call|>{not json}", "", [], ["bad_param_json"]),
    ],
    "mistral": [
        # pre-v11 array holding no JSON: bad_param_json alone (main also said malformed_tag)
        ("[TOOL_CALLS] [not valid json]", "", [], ["bad_param_json"]),
        ('[TOOL_CALLS] [not json, {"name": "f", "arguments": {}}]', "", [("f", {})],
         ["bad_param_json"]),
        # v11: arguments that are another JSON value are read whole into the one error
        ("[TOOL_CALLS]get[ARGS][1] after", " after", [], ["bad_param_json"]),
        ('[TOOL_CALLS]get[ARGS]"s" after', " after", [], ["bad_param_json"]),
        ("[TOOL_CALLS]get[ARGS]{not json} after", " after", [], ["bad_param_json"]),
        ("[TOOL_CALLS]get[ARGS]not json", "not json", [], ["bad_param_json"]),
    ],
    "phi4-mini": [
        # main: malformed_tag
        ("functools[ hello ]", "", [], ["bad_param_json"]),
        ("functools[{not json}] ok", " ok", [], ["bad_param_json"]),
        ('functools[{"name": "f", "arguments": {}} junk] ok', " ok", [("f", {})],
         ["malformed_tag"]),
    ],
    "xlam": [
        ('[{"name": "f", "arguments": {}}, hello]', "", [("f", {})], ["bad_param_json"]),
        ("[TOOL_CALLS][nope]", "", [], ["bad_param_json"]),
    ],
    "llama3-json": [
        ("<|python_tag|>{not json}", "", [], ["bad_param_json"]),
        # main: malformed_tag and the array visible
        ("<|python_tag|>[1] after", " after", [], ["bad_param_json"]),
    ],
    # class D is Python, not JSON (docs/design/markup.md §3.3 `pythonic`): a call whose argument is
    # no literal is bad_param_json; something where a call is due that is no call is structure, malformed_tag
    "pythonic": [
        ("[f(a=x)]", "", [], ["bad_param_json"]),
        ("[f(a=1), hello]", "", [("f", {"a": 1})], ["malformed_tag"]),
    ],
}


@pytest.mark.parametrize("family,case", [(f, c) for f, cases in CASES.items() for c in cases])
def test_a_body_that_is_not_json_is_one_error_of_the_rules_kind(family: str, case: Case) -> None:
    check_case(family, *case)
