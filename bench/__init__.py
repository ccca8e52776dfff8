"""Benchmarks of trajpub's stages and paper reproductions; results are recorded in ``bench/RESULTS.md``."""
