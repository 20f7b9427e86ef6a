"""resultlog schemas package."""
