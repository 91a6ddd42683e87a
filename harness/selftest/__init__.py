"""The harness's self-test: deliberately broken variants of fiskj that the suite must catch (docs/selftest.md).
Nothing outside this package and the command line imports it: a child names the preload in its environment."""
