"""Capped tiers, emulated nodes, projection and a 100 M-file manifest: AU and plans at scale."""
