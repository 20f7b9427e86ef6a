"""resultlog producer package."""
