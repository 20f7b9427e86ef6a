"""resultlog resultlog package."""
