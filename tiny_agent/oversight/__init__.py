"""oversight."""
