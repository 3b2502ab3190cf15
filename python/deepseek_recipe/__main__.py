"""`python -m deepseek_recipe`: the command line (see `deepseek_recipe.cli`)."""

import sys

from .cli import main

sys.exit(main())
