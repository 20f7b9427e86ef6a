"""The randomized fault soak (`make soak`, `python -m tests.soak`) and its tests."""
