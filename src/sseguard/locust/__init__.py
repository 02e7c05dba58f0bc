"""sseguard's probe spread over Locust's master and workers: the user, its locustfile, the launcher.

- ``user``: ``StreamGuardUser``, which checks every stream it sends (runs under gevent);
- ``locustfile``: the file ``sseguard locust`` hands to Locust (it only imports the user);
- ``launch``: what ``sseguard locust`` does before Locust takes the process over (no gevent).

Importing this package imports no Locust and no gevent: the CLI imports ``launch`` through it, and
Locust monkey-patches the whole process for gevent. The user's names load on first use, so a
locustfile subclasses through the module (``from sseguard import locust as sg``;
``class Mine(sg.StreamGuardUser)``) and Locust does not also find the base class there.
"""

from __future__ import annotations

from sseguard._lazy import lazy_names

#: The names ``sseguard.locust.user`` exports, loaded on first access.
_USER_NAMES = frozenset({"FAILURES", "StreamFailure", "StreamGuardUser", "WorkerSink", "WorkerState",
                         "failure_reason", "read_some", "stream_once"})


__getattr__ = lazy_names(__name__, dict.fromkeys(_USER_NAMES, "user"))


__all__ = sorted(_USER_NAMES)
