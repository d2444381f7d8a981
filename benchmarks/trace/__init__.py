"""A real PyTorch job traced, imported and replayed."""
