"""Fault, odd-file-system and bad-input sweeps: every case ends in one sentence, no traceback, no
hang."""
