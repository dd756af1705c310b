"""The package version, in its own module so that every layer can read it without imports."""

__version__ = "0.1.0"
