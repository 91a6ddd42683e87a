"""The race nemesis: legs of one run racing under sequence points (:mod:`.family`, keys in :mod:`.params`, the
races in :mod:`.plan`).  Issue 6 item 3, field cases F14, F15, F18 (docs/field-cases.md); fisk-ai's defects 2 and 3
(docs/spec.md section 16)."""
