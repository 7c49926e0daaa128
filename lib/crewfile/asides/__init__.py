"""asides."""
