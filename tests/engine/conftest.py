"""Import ``deepseek_engine`` from this source tree.

The tree's ``engine/`` folder goes first on ``sys.path``, ahead of any installed
copy: an editable install made from another checkout (the main one, say) would
otherwise be the code under test.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ENGINE = str(Path(__file__).resolve().parents[2] / "engine")
if _ENGINE not in sys.path:
    sys.path.insert(0, _ENGINE)
