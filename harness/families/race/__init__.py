"""The race nemesis: legs of one run racing under sequence points (:mod:`.family`, keys in :mod:`.params`).

Issue 6 item 3 and field cases F14, F15, F18 (docs/field-cases.md); fisk-ai's
defects 2 and 3 (docs/spec.md section 16).  Every subject races through its
own commands under the one leg runner; the invariants judge the histories.
"""

from __future__ import annotations

from harness.families.race.family import RACE, races_of
from harness.families.race.params import RACES

__all__ = ["RACE", "RACES", "races_of"]
