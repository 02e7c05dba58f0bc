"""sseguard's benchmarks: one folder per question, each script rerunnable by the command that
``docs/benchmarks.md`` prints beside its figure (``python -m bench.<folder>.<script>``, from the
repository's root). ``bench/README.md`` maps every figure to its script; ``bench/harness.py`` holds
what the scripts share."""
