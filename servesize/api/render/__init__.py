"""Core results rendered as response schemas and problems: one module per route family."""
