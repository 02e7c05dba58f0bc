"""The proxy's two sans-IO machines: every decision of a guarded stream, no socket and no clock.

``attempts.Attempts`` decides before the client's first byte (ask the upstream again, after how long,
or answer the client with an error and its ``x-should-retry``), applying ``retry``'s rules and budget;
``stream.StreamMachine`` decides after it (forward, hold, end, ask for a continuation, record), and
answers with the ``actions`` its driver performs. ``frames.Frames`` is the seam a frame rewriter
(``repair/``, ``resume/``) implements; ``outcome`` words the error frames. In the manner of h11's
``Connection``: the driver (``sseguard.proxy.driver``) feeds events in and performs what comes out.
These modules import the core and each other only (``tests/test_layers.py`` reads this folder).
"""
