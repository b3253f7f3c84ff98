"""rlcloud."""
