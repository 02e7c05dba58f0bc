"""The proxy's aiohttp side: sockets, timers and the app's shared state, around the sans-IO machines.

Nothing here decides what a stream deserves (that is ``sseguard.proxy.machines``); these modules
turn requests, upstream reads, stall timers and client departures into the machines' events and
perform the actions they answer. ``app`` wires the routes; ``guarded`` runs one client stream's
attempts; ``stream`` drives one relayed stream; ``passthrough`` relays every other path verbatim;
``forward`` holds what crosses the proxy (headers, routes, the proxy's own error bodies); ``stall``
the stall timer; ``state`` what the handlers share; ``metrics`` and ``traces`` what is reported;
``worker`` one serving process of ``--workers``.
"""
