"""The parsing machinery every markup family is built from, one module per grammar or shared part.

A grammar reads one shape of markup whatever its tags are called: JSON in tags (``json_in_tags``),
JSON arrays after a marker (``json_array``, its states, scanner, tables and builders), key/value tags
(``key_value_tags``), invoke/parameter tags (``invoke_parameters``), DSML (``dsml``), Python call
lists (``python_lists``), ``call:NAME{…}`` (``call_braces``), channel messages (``channel_messages``)…
The shared parts: the parser base every grammar drives (``base``), block bookkeeping (``blocks``),
strict JSON (``strict_json``), marker search (``markers``), schema-typed values (``typed_values``),
reasoning spans (``thinking``) and rendering helpers (``render``). A grammar names no vendor: the
vendors' families in ``toolcalls.vendors`` pick a grammar and give it their markers and options
(docs/design/architecture.md "Where things live").
"""
