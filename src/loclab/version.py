"""loclab's version, in a module of its own: the documents loclab writes carry it, and a
module that stamps one imports this, not the package's API (``loclab/__init__``)."""

__version__ = "0.1.0"
