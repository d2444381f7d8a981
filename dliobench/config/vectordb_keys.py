"""The ``vectordb`` section: the vector-database benchmark's keys (docs/vectordb.md), named as
mlcommons/storage's ``vectordb`` command line names them
(``mlpstorage_py/cli/vectordb_args.py``@041cfcf3: ``--num-vectors`` is
``vectordb.num_vectors``) and its configs' keys (``vdb_benchmark/vdbbench/configs/
1m_diskann.yaml``@1d513297: ``max_degree``, ``search_list_size``), and the table ``dliobench
vectordb`` builds its options from, so a flag and its key are declared once."""

from __future__ import annotations

from dataclasses import dataclass

from dliobench.config.keys import key

# mlpstorage_py/config.py@be69aeb5: VDB_INDEX_TYPES, VDB_INDEX_TYPES_CLOSED, VDB_BENCHMARK_MODES
# (upstream spells them in capitals; choices are case-insensitive and kept in lower case)
INDEX_TYPES = ("diskann", "hnsw", "aisaq", "ivf_flat", "ivf_sq8", "flat")
INDEX_TYPES_CLOSED = ("diskann", "hnsw", "aisaq")
MODES = ("timed", "query_count", "sweep")  # sweep: run/vectordb/sweep.py
ENGINES = ("diskann", "milvus")  # milvus: engines/milvus.py
# clustered is ours (upstream issue #625: uniform vectors make recall meaningless); uniform
# and normal are upstream's (config.py@be69aeb5 DISTRIBUTIONS; zipfian is refused); npy: the
# user's own vectors (vectordb.vectors_file)
DISTRIBUTIONS = ("clustered", "uniform", "normal", "npy")
METRICS = ("cosine", "l2")


@dataclass(frozen=True)
class VectorDBConfig:
    """One vector-database run: the vectors, the index built over them, the queries and the
    recall floor. Defaults are upstream's (``configs/vectordbbench/default.yaml``: 1M x 1536,
    DISKANN, max_degree 64, search_list_size 200) unless the help says ours."""

    engine: str = key("diskann", "choice", "what serves the queries: diskann (embedded "
                      "DiskANN reading its index from vectordb.index_dir) or milvus (a Milvus "
                      "server at host:port)", choices=ENGINES)
    index_dir: str = key("vectordb", "path", "ours: folder on the storage under test that "
                         "holds the index folders (POSIX only)", nonempty=True)
    collection: str = key("", "str", "name of the index folder under index_dir (upstream's "
                          "--collection; empty: made from the vectors' shape and seed)")
    num_vectors: int = key(1_000_000, "int", "vectors in the index (before vectordb.scale)",
                           minimum=1)
    dimension: int = key(1536, "int", "dimensions of each vector", minimum=2, maximum=32768)
    num_shards: int = key(1, "int", "upstream's shards (Milvus spreads inserts over them); "
                          "the diskann engine builds one index and records it", minimum=1)
    vector_dtype: str = key("float_vector", "choice", "element type (FLOAT_VECTOR: float32)",
                            choices=("float_vector",))
    scale: float = key(1.0, "float", "ours: num_vectors is multiplied by this (a 1M preset "
                       "at scale 0.01 is 10,000 vectors)", minimum=1e-9, maximum=1e6)
    distribution: str = key("clustered", "choice", "vectors: clustered (ours, a seeded "
                            "mixture on the unit sphere), uniform or normal (upstream's), or "
                            "npy (vectordb.vectors_file)", choices=DISTRIBUTIONS)
    clusters: int = key(64, "int", "ours: mixture components of the clustered vectors",
                        minimum=1)
    spread: float = key(0.35, "float", "ours: each clustered vector is its centre plus "
                        "Gaussian noise of this standard deviation per unit of the centre's "
                        "norm, then normalized", minimum=0, maximum=100)
    vectors_file: str = key("", "path", "your vectors to index instead of generated ones "
                            "(distribution npy): .npy (N x dimension), .fvecs, .bvecs or "
                            ".parquet (run/vectordb/inputs.py)")
    vector_column: str = key("", "str", "ours: the parquet files' vector column (empty: the "
                             "only list column, or vector/emb/embedding)")
    queries_file: str = key("", "path", "ours: your queries (same formats; its first "
                            "num_query_vectors rows) instead of draws near your vectors")
    truth_file: str = key("", "path", "ours: your ground truth (.ivecs or .npy ids, a row per "
                          "query), checked against ours on a sample of queries")
    seed: int = key(42, "int", "ours: seed of the vectors and of the queries", minimum=0)
    index_type: str = key("diskann", "choice", "index type (upstream's choices; the diskann "
                          "engine builds DISKANN)", choices=INDEX_TYPES)
    metric_type: str = key("cosine", "choice", "distance (vectors are normalized, so COSINE "
                           "ranks as L2 on them)", choices=METRICS)
    max_degree: int = key(64, "int", "graph degree R of the index", minimum=1, maximum=512)
    search_list_size: int = key(200, "int", "build's candidate list L", minimum=1,
                                maximum=100000)
    pq_bytes: int = key(0, "int", "ours: bytes of each vector's in-memory PQ code (0: a "
                        "quarter of the raw vector's bytes, at most the dimension)", minimum=0)
    build_threads: int = key(0, "int", "threads building the index (0: every CPU)",
                             minimum=0)
    search_list: int = key(200, "int", "search's candidate list L (upstream's --search-ef)",
                           minimum=1, maximum=100000)
    beam_width: int = key(4, "int", "DiskANN reads in flight per query (its beam width)",
                          minimum=1, maximum=128)
    cache_nodes: int = key(0, "int", "graph nodes around the medoid DiskANN keeps in memory",
                           minimum=0)
    k: int = key(10, "int", "neighbours asked per query and k of recall@k (upstream's "
                 "--search-limit)", minimum=1, maximum=10000)
    num_query_vectors: int = key(1000, "int", "distinct seeded queries (with their exact "
                                 "ground truth); runs cycle through them", minimum=1)
    min_recall: float = key(0.90, "float", "ours: a run whose recall@k is below this is "
                            "invalid, whatever its QPS", minimum=0, maximum=1)
    mode: str = key("timed", "choice", "timed (vectordb.runtime), query_count "
                    "(vectordb.queries) or sweep (a timed window per point of "
                    "vectordb.sweep_threads x vectordb.sweep_search_list)", choices=MODES)
    runtime: float = key(60.0, "seconds", "length of a timed run (upstream's --runtime, "
                         "default 60 s; the rules ask at least 30 s)", minimum=0.01,
                         maximum=86400)
    queries: int = key(0, "int", "queries of a query_count run, over all ranks (upstream's "
                       "--queries)", minimum=0)
    batch_size: int = key(1, "int", "queries per search call (upstream's run --batch-size)",
                          minimum=1, maximum=100000)
    query_threads: int = key(1, "int", "ours: query clients per rank (threads); ranks are "
                             "upstream's --num-query-processes", minimum=1, maximum=4096)
    report_count: int = key(100, "int", "a progress line every this many search calls of the "
                            "first client, at most one a second (upstream's --report-count)",
                            minimum=1)
    host: str = key("", "str", "the milvus engine's server (upstream's --host; empty: "
                    "127.0.0.1)")
    port: int = key(19530, "int", "the milvus engine's port (upstream's --port)", minimum=1,
                    maximum=65535)
    # the milvus engine's load: mlpstorage's datagen defaults (vectordb_args.py@041cfcf3:
    # --batch-size 1000, --chunk-size 10000, passed to load_vdb.py@74cd0c40, whose --M 16 and
    # --ef-construction 200 are HNSW's) and its IVF indexes (ours)
    insert_batch: int = key(1000, "int", "vectors per insert call (upstream's datagen "
                            "--batch-size)", minimum=1)
    chunk_size: int = key(10_000, "int", "vectors read into memory at a time while loading "
                          "(upstream's datagen --chunk-size)", minimum=1)
    m: int = key(16, "int", "HNSW's M (upstream's --M)", minimum=2, maximum=2048)
    ef_construction: int = key(200, "int", "HNSW's efConstruction (upstream's "
                               "--ef-construction)", minimum=1, maximum=100000)
    nlist: int = key(128, "int", "ours: IVF_FLAT/IVF_SQ8 clusters (nlist); a search probes "
                     "vectordb.search_list of them, at most nlist", minimum=1)
    server_timeout: float = key(30.0, "seconds", "ours: the milvus engine's wait for one call "
                                "of the server, and for its index build (x10)", minimum=0.1,
                                maximum=86400)
    sweep_threads: str = key("1,2,4", "str", "ours: mode sweep's client threads per rank, "
                             "one timed window of vectordb.runtime each")
    sweep_search_list: str = key("", "str", "ours: mode sweep's search lists (DiskANN's L, "
                                 "HNSW's ef, IVF's nprobe), e.g. 16,32,64 (empty: "
                                 "vectordb.search_list only)")
    force: bool = key(False, "bool", "datagen: rebuild an index that exists (upstream's "
                      "--force)")


# (flag, key, kind): upstream's vectordb options (vectordb_args.py@041cfcf3), each setting
# vectordb.<key>; kind flag is store_true, others take a value
UPSTREAM_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--host", "host", "str"), ("--port", "port", "int"),
    ("--collection", "collection", "str"), ("--dimension", "dimension", "int"),
    ("--num-vectors", "num_vectors", "int"), ("--num-shards", "num_shards", "int"),
    ("--vector-dtype", "vector_dtype", "str"), ("--index-type", "index_type", "str"),
    ("--distribution", "distribution", "str"), ("--force", "force", "flag"),
    ("--runtime", "runtime", "float"), ("--queries", "queries", "int"),
    ("--report-count", "report_count", "int"), ("--search-ef", "search_list", "int"),
    ("--search-limit", "k", "int"), ("--num-query-vectors", "num_query_vectors", "int"),
    ("--engine", "engine", "str"), ("--index-dir", "index_dir", "str"),
    ("--vectors-file", "vectors_file", "str"), ("--queries-file", "queries_file", "str"),
    ("--truth-file", "truth_file", "str"), ("--min-recall", "min_recall", "float"),
    ("--query-threads", "query_threads", "int"), ("--scale", "scale", "float"),
)
# upstream's --config names (configs/vectordbbench/*.yaml) and the workloads that carry them
PRESETS = {"default": "vectordb", "10m": "vectordb_10m", "1m_512dim": "vectordb_1m_512dim"}


def overrides_from(values: dict[str, object]) -> list[str]:
    """``vectordb.KEY=VALUE`` overrides for the flags given (argparse's namespace as a dict,
    a flag not given being None or False), after the workflow keys of a vector-database run."""
    out = ["workflow.vectordb=true", "workflow.train=false", "workflow.generate_data=false"]
    if values.get("vdb_host") and not values.get("vdb_engine"):  # a server is named
        out.append("vectordb.engine=milvus")
    for _flag, name, kind in UPSTREAM_FLAGS:
        value = values.get(f"vdb_{name}")
        if value is None or (kind == "flag" and not value):
            continue
        out.append(f"vectordb.{name}={value}")
    if values.get("vdb_queries"):
        out.append("vectordb.mode=query_count")
    if values.get("vdb_mode"):
        out.append(f"vectordb.mode={values['vdb_mode']}")
    if values.get("vdb_batch_size"):
        out.append(f"vectordb.batch_size={values['vdb_batch_size']}")
    if values.get("vdb_insert_batch"):
        out.append(f"vectordb.insert_batch={values['vdb_insert_batch']}")
    if values.get("vdb_chunk"):
        out.append(f"vectordb.chunk_size={values['vdb_chunk']}")
    if values.get("vdb_results_dir"):
        out.append(f"output.folder={values['vdb_results_dir']}")
    return out
