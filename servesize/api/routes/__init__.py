"""HTTP routes: thin adapters from schemas to repositories and the core."""
