"""trajpub: governed releases of privacy-protected trajectory data (the shared core)."""

__version__ = "0.1.0"
