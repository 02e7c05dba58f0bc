"""``python -m sseguard.cli``: the same as the ``sseguard`` console script."""

from sseguard.cli import main

main()
