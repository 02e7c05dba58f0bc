"""The built-in markup families: one thin module per vendor (or group of look-alike vendors), each
building its ``Family`` descriptors from a grammar of ``toolcalls.grammars`` with its markers, aliases
and options, and nothing else. Each is registered by name in the ``sseguard.families`` entry point
group of ``pyproject.toml``, the way a third-party plugin registers its own; ``auto``'s order over
them is one table (``toolcalls.auto.AUTO_ORDER``).

Why ``vendors`` and not ``families``: ``sseguard.core.toolcalls.families`` is the public function that
lists the registry; a subpackage of that name would replace it as the package's attribute.
"""
