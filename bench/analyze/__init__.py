"""The analyzer: seconds and memory of `sseguard analyze` over large runs and stores."""
