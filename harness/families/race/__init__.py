"""The race nemesis: legs of one run racing under sequence points (docs/scenarios.md, family ``race``)."""
