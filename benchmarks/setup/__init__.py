"""The project itself: a fresh clone's make run and the quick start after it."""
