"""background."""
