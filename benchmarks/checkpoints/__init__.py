"""Checkpoint writes and reads against fio and dd."""
