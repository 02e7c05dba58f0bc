"""Test your own client, agent or gateway against every bad ending, over every protocol.

The pytest plugin (``sseguard.pytest_plugin``, registered as ``pytest11``) gives the fixture
``sseguard_chaos``: a fresh chaos upstream per test on a free loopback port, driven from the test::

    @pytest.mark.parametrize("fault", BAD_ENDINGS["chat"])
    def test_my_agent_never_takes_half_an_answer(sseguard_chaos, fault):
        sseguard_chaos.inject(fault)
        with pytest.raises(MyAgentError):
            my_agent.run(base_url=sseguard_chaos.base_url)

``check_stream(body, api=...)`` judges a body a test captured from its own server. The fixture
reference is ``docs/testing.md``. The chaos server (aiohttp) is imported only when a fixture starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sseguard._lazy import lazy_names
from sseguard.testing._check import check_stream
from sseguard.testing._vocabulary import BAD_ENDINGS, DIALECTS

if TYPE_CHECKING:
    from sseguard.testing._upstream import ChaosUpstream, ServedRequest

__all__ = ["BAD_ENDINGS", "DIALECTS", "ChaosUpstream", "ServedRequest", "check_stream"]


#: The chaos upstream (aiohttp) loads on first use: the checks alone import no HTTP library.
__getattr__ = lazy_names(__name__, {"ChaosUpstream": "_upstream", "ServedRequest": "_upstream"})
