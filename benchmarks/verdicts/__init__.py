"""Verdicts on this host: who stops the count, the client or the storage."""
