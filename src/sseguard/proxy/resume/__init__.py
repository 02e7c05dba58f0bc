"""``--resume``: continue a stream that broke after the client got content (pure, no I/O).

``dialects`` is the table (one ``ResumeDialect`` per server and protocol, what the stream machine
needs of each); the dialects' continuation states and splices live beside it, one module per
protocol family: ``chat`` (vLLM, SGLang, DeepSeek), ``messages`` (Anthropic), ``background``
(OpenAI Responses read again); ``usage`` sums the usage over the attempts; ``events`` reads the
client's frames and a continuation's body as SSE events with the core's decoder (CR, LF, CRLF).
They import the core, ``sseguard.proxy.machines`` and each other only (``tests/test_layers.py``).
"""
