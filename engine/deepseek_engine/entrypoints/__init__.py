"""Ways into the engine from outside: the HTTP server's token backend and the ``deepseek-engine serve`` command."""
