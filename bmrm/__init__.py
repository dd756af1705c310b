"""Bundle-method regularized risk minimization (Teo, Vishwanathan, Smola & Le, JMLR 2010)."""

__version__ = "0.1.0"
