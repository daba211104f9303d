"""The base layer: lattice times, column kinds, the interner, columnar updates, consolidation (numpy and pyarrow only)."""
