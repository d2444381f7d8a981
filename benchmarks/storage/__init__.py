"""The disk itself: O_DIRECT reads against fio, metadata rates."""
