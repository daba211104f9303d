"""The graph: the build context, operator nodes, scopes and the one scheduler (imports base only)."""
