"""The locustfile ``sseguard locust`` runs: Locust finds the user class here and nothing else.

A file of its own because Locust loads a locustfile by path as a fresh module; pointing it at
``sseguard/locust/user.py`` would load that module twice (once by path, once by the package imports).
"""

from sseguard.locust.user import StreamGuardUser

__all__ = ["StreamGuardUser"]
