"""``sseguard proxy``: a guard proxy for OpenAI- and Anthropic-compatible endpoints that never lets a
stream end silently (chat completions, Responses, Messages).

    async with run_proxy(ProxyConfig.from_options(upstream="http://127.0.0.1:8000/v1")) as proxy:
        ...  # point an OpenAI client at proxy.url, an Anthropic client at proxy.root

Frames are forwarded as they arrive and checked in flight; a stream that ends badly under the policy
reaches the client as an error the SDK raises (or a reset), never as a clean end. See docs/proxy.md.
"""

from sseguard.proxy.app import RunningProxy, make_proxy_app, run_proxy, serve_proxy
from sseguard.proxy.config import OnBadEnd, ProxyConfig

__all__ = ["OnBadEnd", "ProxyConfig", "RunningProxy", "make_proxy_app", "run_proxy", "serve_proxy"]
