"""``--resume``: continue a stream that broke after the client got content (pure, no I/O).

``dialects`` is the table (one ``ResumeDialect`` per server and protocol, what the stream machine
needs of each); the dialects' continuation states and splices live beside it, one module per
protocol family: ``chat`` (vLLM, SGLang, DeepSeek), ``messages`` (Anthropic), ``background``
(OpenAI Responses read again); ``usage`` sums the usage over the attempts. They import the core,
``sseguard.proxy.machines`` and each other only (``tests/test_layers.py``).
"""
