"""Import ``deepseek_engine`` and ``deepseek_kernels`` from this source tree.

The tree's ``engine/`` and ``kernels/`` folders go first on ``sys.path``, ahead of any installed
copy: an editable install made from another checkout (the main one, say) would
otherwise be the code under test.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
for _folder in ("engine", "kernels"):
    _path = str(_ROOT / _folder)
    if _path not in sys.path:
        sys.path.insert(0, _path)
