"""The vector-database benchmark against a read-IOPS cap and the binding's own loop."""
