"""The worked example of docs/extending.md: a toy mechanism and a toy attack, each one module, each added to
trajpub by one registration line (tests/unit/test_extending.py does exactly that)."""
