"""The stream checkers: what checking costs beyond bare SSE and JSON parsing."""
