"""asynceval."""
