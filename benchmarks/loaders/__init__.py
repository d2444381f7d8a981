"""Loaders against the compiled ceiling and the pipelines a user would write; decoders, parquet,
tf.data."""
