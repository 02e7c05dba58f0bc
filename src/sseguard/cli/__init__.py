"""The ``sseguard`` command line: parses arguments and calls library functions, nothing more.

One module per command, each registering itself on the shared typer app (``_app.py``) when imported
here, in the order of the tour in README.md. Probe, sweep and locust share the ``LOAD`` option group
(``_options.py``); every protocol and family name a command shows or accepts comes from the registries
(``_names.py``). A command imports its library (aiohttp, Locust, scipy) only when it runs, so
``sseguard --help`` stays quick. The console script is ``sseguard = "sseguard.cli:main"``.
"""

from __future__ import annotations

from sseguard.cli._app import app, main

# Each import registers its command(s); the order here is the order of ``sseguard --help``.
# isort: off
from sseguard.cli import check, chaos, probe, locust, proxy, analyze, export, parse, tokenizer  # noqa: F401
from sseguard.cli import demo, protocols  # noqa: F401
# isort: on

__all__ = ["app", "main"]
