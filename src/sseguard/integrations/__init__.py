"""sseguard inside the tools operators already run (``integrations/<tool>/``).

Each integration imports its tool lazily, inside its own package: importing ``sseguard`` (or any other
integration) never imports the tool, and the tool is the user's to install. The judging stays in the
sans-IO core; an integration only turns what its tool hands it into bytes for a checker and a verdict
into what its tool does with an error.
"""
