"""Entry points over ``LLM``: the protocol API (``ProtocolEngine``, through the codec), the batch CLI, and the
HTTP server's token backend with the ``deepseek-engine serve`` command."""
