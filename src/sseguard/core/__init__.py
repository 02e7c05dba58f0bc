"""The sans-IO core: SSE decoding, the stream contracts, verdicts and policy, records, redaction, the
incremental markup parsers and the reasoning splitter.

Nothing here does I/O or imports an I/O library (aiohttp, httpx, asyncio, sqlite3, …) or any adapter;
every adapter (chaos, probe, proxy, store, analyze, client, the engines) is built on it. The layer test
(tests/test_layers.py) reads this folder as layer 0 (docs/design/architecture.md "Layers").
"""
