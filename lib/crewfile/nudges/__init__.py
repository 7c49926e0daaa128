"""nudges."""
