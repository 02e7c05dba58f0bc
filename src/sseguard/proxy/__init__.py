"""``sseguard proxy``: a guard proxy for OpenAI- and Anthropic-compatible endpoints that never lets a
stream end silently (chat completions, Responses, Messages).

    async with run_proxy(ProxyConfig.from_options(upstream="http://127.0.0.1:8000/v1")) as proxy:
        ...  # point an OpenAI client at proxy.url, an Anthropic client at proxy.root

Frames are forwarded as they arrive and checked in flight; a stream that ends badly under the policy
reaches the client as an error the SDK raises (or a reset), never as a clean end. See docs/proxy.md.

The rooms, one folder each (docs/design/architecture.md "The path of one proxied streamed request"):

- ``machines/``: the two sans-IO machines that hold every decision — ``attempts`` before the client's
  first byte (with the ``retry`` rules), ``stream`` after it (with its ``actions``, the ``frames`` seam
  and the ``outcome`` wording) — importing only the core and each other;
- ``resume/``: ``--resume``, the table of dialects (``dialects``) and each dialect's continuation
  state and splice (``chat``, ``messages``, ``background``, summed ``usage``), pure as well;
- ``repair/``: ``--repair-markup``, one frame rewriter per protocol over a shared ``base``, pure;
- ``driver/``: the aiohttp side that only turns sockets and timers into the machines' events —
  ``app`` wires the routes, ``guarded`` runs a stream's attempts, ``stream`` drives one relayed
  stream, ``passthrough`` relays every other path verbatim, ``state`` holds what the handlers share;
- ``config``: the flags, checked (the one module both the CLI and the driver read).

The names below are loaded on first use, so that importing ``sseguard.proxy.repair`` does not pull in
aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sseguard._lazy import lazy_names

if TYPE_CHECKING:
    from sseguard.proxy.config import OnBadEnd, ProxyConfig
    from sseguard.proxy.driver.app import RunningProxy, make_proxy_app, run_proxy, serve_proxy

__all__ = ["OnBadEnd", "ProxyConfig", "RunningProxy", "make_proxy_app", "run_proxy", "serve_proxy"]

_HOME = {"OnBadEnd": "config", "ProxyConfig": "config", "RunningProxy": "driver.app",
         "make_proxy_app": "driver.app", "run_proxy": "driver.app", "serve_proxy": "driver.app"}


#: The public names, imported from their module on first use (PEP 562).
__getattr__ = lazy_names(__name__, _HOME)
