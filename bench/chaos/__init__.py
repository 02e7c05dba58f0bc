"""The chaos upstream: how many streams and chunks per second one process serves."""
