"""The vector-database benchmark (docs/vectordb.md): vectors, an index built on the storage
under test, its exact ground truth, and timed queries whose recall is checked. The engine
(``engines``) is what builds and searches the index: DiskANN embedded, or a server later."""
