"""The server is part of the codec package: importing it (app, fleet backends, CLI) never imports
torch or the engine."""

import subprocess
import sys


def test_server_does_not_import_torch():
    code = ("import sys\n"
            "import deepseek_recipe.server, deepseek_recipe.server.app, deepseek_recipe.server.run\n"
            "import deepseek_recipe.server.fleet, deepseek_recipe.cli.serve\n"
            "from deepseek_recipe.cli import build_parser\n"
            "build_parser()\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'deepseek_engine', 'deepseek_kernels'))\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
