"""The ``sseguard`` command line: parses arguments and calls library functions, nothing more.

One module per command, each registering itself on the shared typer app (``_app.py``) when imported;
the app imports a command's module only when that command is named (``_app.COMMANDS``, in the order of
the tour in README.md), and the command imports its library (aiohttp, Locust, DuckDB) only when it
runs, so ``sseguard --help`` and ``sseguard check`` start at once. Probe, sweep and locust share the
``LOAD`` option group (``_options.py``); every protocol and family name a command shows or accepts
comes from the registries (``_names.py``). The console script is ``sseguard = "sseguard.cli:main"``.
"""

from __future__ import annotations

from sseguard.cli._app import app, main

__all__ = ["app", "main"]
