"""crew."""
