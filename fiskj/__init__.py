"""fiskj: the reference journal and resume engine for agent runs (fisk-ai v2 wire format).

Modules, one concept each: :mod:`fiskj.records` (typed records),
:mod:`fiskj.codec` (one line <-> one record), :mod:`fiskj.reader` (a journal
file -> records, torn tail reported), :mod:`fiskj.fold` (records -> RunState,
pure), :mod:`fiskj.fingerprint` (the resume guard), :mod:`fiskj.errors`,
and the IO side: the store, journal writer, lock, IO seam, agent loop and CLI.
"""

__version__ = "0.1.0"
