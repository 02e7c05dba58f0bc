"""The tool-call markup parsers: cost per chunk, linearity, against the rescanning design."""
