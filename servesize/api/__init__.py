"""The HTTP shell around the planning core."""
