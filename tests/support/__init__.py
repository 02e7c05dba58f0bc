"""Test support shared by several test folders (and by bench/, run with ``PYTHONPATH=tests``).

Imported as ``support.<name>``: ``tests/`` is on sys.path through the root conftest. A helper used by
one test folder only lives in that folder instead, imported by its bare name (tests/README.md).
"""
