"""sseguard's parsers inside vLLM and SGLang against the engines' own."""
