"""Entry points over ``LLM``: the protocol API (``ProtocolEngine``, through the codec) and the batch CLI."""
