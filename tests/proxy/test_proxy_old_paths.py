"""The proxy's public names resolve after its rooms became folders (issue 46); the old module paths
(``sseguard.proxy.app``, ``…worker``) are checked with the others in tests/test_moved.py."""

from __future__ import annotations


def test_the_public_names_of_sseguard_proxy_still_resolve() -> None:
    import sseguard.proxy
    from sseguard.proxy.config import ProxyConfig
    from sseguard.proxy.driver.app import RunningProxy, run_proxy

    assert sseguard.proxy.ProxyConfig is ProxyConfig
    assert sseguard.proxy.run_proxy is run_proxy and sseguard.proxy.RunningProxy is RunningProxy
    assert sorted(sseguard.proxy.__all__) == ["OnBadEnd", "ProxyConfig", "RunningProxy",
                                              "make_proxy_app", "run_proxy", "serve_proxy"]
