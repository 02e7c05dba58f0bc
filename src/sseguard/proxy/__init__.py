"""``sseguard proxy``: a guard proxy for OpenAI- and Anthropic-compatible endpoints that never lets a
stream end silently (chat completions, Responses, Messages).

    async with run_proxy(ProxyConfig.from_options(upstream="http://127.0.0.1:8000/v1")) as proxy:
        ...  # point an OpenAI client at proxy.url, an Anthropic client at proxy.root

Frames are forwarded as they arrive and checked in flight; a stream that ends badly under the policy
reaches the client as an error the SDK raises (or a reset), never as a clean end. See docs/proxy.md.

The rooms: ``app`` wires the routes; ``guarded`` → ``relay`` (the checked stream) and ``passthrough``
(every other path, verbatim); ``frames`` is the seam the relay and the markup repair (``repair/``, pure,
no aiohttp) both depend on; ``state`` holds what the handlers share. The names below are loaded on
first use, so that importing ``sseguard.proxy.repair`` does not pull in aiohttp.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sseguard.proxy.app import RunningProxy, make_proxy_app, run_proxy, serve_proxy
    from sseguard.proxy.config import OnBadEnd, ProxyConfig

__all__ = ["OnBadEnd", "ProxyConfig", "RunningProxy", "make_proxy_app", "run_proxy", "serve_proxy"]

_HOME = {"OnBadEnd": "config", "ProxyConfig": "config", "RunningProxy": "app",
         "make_proxy_app": "app", "run_proxy": "app", "serve_proxy": "app"}


def __getattr__(name: str) -> Any:
    """The public names, imported from their module on first use (PEP 562)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'sseguard.proxy' has no attribute {name!r}")
    return getattr(importlib.import_module(f"sseguard.proxy.{home}"), name)
