"""The pure half of ``sparktui init`` (see its modules)."""
