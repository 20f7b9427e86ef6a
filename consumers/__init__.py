"""resultlog consumers package."""
