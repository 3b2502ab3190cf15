"""Run the server with uvicorn (what both ``serve`` commands call)."""

from __future__ import annotations

from .app import create_app
from .backend import TokenBackend
from .config import ServerConfig


def run_server(backend: TokenBackend, config: ServerConfig, log_level: str = "info") -> None:
    """Serve ``backend`` on ``config.host:config.port`` until interrupted."""
    import uvicorn

    app = create_app(backend, config)
    uvicorn.run(app, host=config.host, port=config.port, log_level=log_level, timeout_graceful_shutdown=5)
