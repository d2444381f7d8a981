"""The ``kvcache`` section: the KV-cache benchmark's keys, under the names of the options of
mlcommons/storage's ``kv_cache_benchmark`` (``kv_cache/cli.py``@23aa82ed: ``--num-users`` is
``kvcache.num_users``), and the table ``dliobench kvcache`` builds its options from, so a flag
and its key are declared once."""

from __future__ import annotations

from dataclasses import dataclass

from dliobench.config.keys import key

MODELS = ("tiny-1b", "mistral-7b", "llama2-7b", "llama3.1-8b", "llama3.1-70b-instruct")
GENERATION_MODES = ("none", "fast", "realistic")


@dataclass(frozen=True)
class KVCacheConfig:
    """One KV-cache run: the model whose KV entries are cached, the users and their
    requests, the tiers (GPU emulated, CPU memory, a storage folder) and how the I/O is
    issued. Defaults are upstream's (cli.py@23aa82ed) unless the help says ours."""

    model: str = key("llama3.1-8b", "choice", "model whose KV cache is emulated (its KV bytes "
                     "per token: docs/kvcache.md)", choices=MODELS)
    num_users: int = key(100, "int", "users simulated on each rank", minimum=1,
                         maximum=100000)
    duration: float = key(60.0, "seconds", "length of the run in seconds (upstream's "
                          "--duration)", minimum=0.01, maximum=86400)
    max_requests: int = key(0, "int", "stop after this many requests on each rank "
                            "(0: run for duration)", minimum=0)
    gpu_mem_gb: float = key(16.0, "float", "GPU tier budget in GiB per GPU (emulated: a "
                            "budget and a transfer rate, gpu_bandwidth_gbps)", minimum=0,
                            maximum=65536)
    num_gpus: int = key(1, "int", "GPUs of the tensor-parallel group: the GPU tier is "
                        "num_gpus x gpu_mem_gb", minimum=1, maximum=4096)
    tensor_parallel: int = key(1, "int", "tensor-parallel degree: each entry's objects are "
                               "1/TP of it (upstream's per-rank share)", minimum=1,
                               maximum=4096)
    gpu_bandwidth_gbps: float = key(
        25.0, "float", "ours: the emulated GPU tier's transfer rate in GB/s (host to device, "
        "a PCIe 4 x16 link)", minimum=0.001, maximum=1e6)
    cpu_mem_gb: float = key(32.0, "float", "CPU tier budget in GiB (real memory)", minimum=0,
                            maximum=131072)
    storage_capacity_gb: float = key(
        0.0, "float", "storage tier capacity in GiB per rank, its least recently used entries "
        "deleted beyond it (0: 90 % of the free space found at the start over the ranks; "
        "unbounded on S3)", minimum=0, maximum=1e9)
    cache_dir: str = key("", "path", "folder or s3:// URL of the storage tier (empty: a "
                         "temporary folder)")
    generation_mode: str = key("realistic", "choice", "emulated decode time per generated "
                               "token: none 0, fast 2 ms, realistic 30 ms",
                               choices=GENERATION_MODES)
    max_concurrent_allocs: int = key(0, "int", "most prefill writes at once (0: no limit)",
                                     minimum=0)
    disable_multi_turn: bool = key(False, "bool", "no multi-turn conversations (each request "
                                   "its own entry)")
    disable_prefix_caching: bool = key(False, "bool", "no shared system-prompt prefixes")
    seed: int = key(42, "int", "seed of the request schedule (ours: 42 by default, the v3.0 "
                    "submissions' value; each rank draws from seed + rank)", minimum=0)
    request_rate: float = key(0.0, "float", "most requests per second on each rank "
                              "(0: users' think times alone)", minimum=0, maximum=1e6)
    enable_autoscaling: bool = key(False, "bool", "change each rank's active users every "
                                   "autoscaler_interval from what it measured (upstream's "
                                   "rules: docs/kvcache.md)")
    autoscaler_mode: str = key("qos", "choice", "qos: users x1.2 while the storage I/O P95 "
                               "is under 72 ms, x0.8 over 88 ms; capacity: users added until "
                               "the throughput stops rising, then the run stops",
                               choices=("qos", "capacity"))
    autoscaler_interval: float = key(10.0, "seconds", "ours: seconds between the "
                                     "autoscaler's decisions (upstream's fixed 10)",
                                     minimum=0.01, maximum=86400)
    autoscaler_max_users: int = key(500, "int", "ours: most users a rank's autoscaler may "
                                    "reach (upstream's cap, 500), each drawn up front",
                                    minimum=1, maximum=500)
    performance_profile: str = key("latency", "choice", "upstream's pass/fail profile: "
                                   "QoS targets judged (latency) or not (throughput)",
                                   choices=("latency", "throughput"))
    dataset_path: str = key("", "path", "ShareGPT-format JSON file whose conversation "
                            "lengths are replayed (empty: synthetic users)")
    max_conversations: int = key(500, "int", "conversations read from dataset_path",
                                 minimum=1)
    io_depth: int = key(0, "int", "ours: requests served at once on each rank, the I/O "
                        "pool's size (0: 16, or num_users when fewer)", minimum=0,
                        maximum=1024)
    entry_scale: float = key(
        1.0, "float", "ours: every KV entry's bytes multiplied by this (small machines and "
        "tests; the result states it)", minimum=1e-6, maximum=1)
    output_json: str = key("", "path", "upstream's --output FILE.json: the run's figures also "
                           "written there as upstream's results ({\"summary\": ...})")
    direct_io: bool = key(True, "bool", "ours: storage-tier files read and written with "
                          "O_DIRECT where the file system takes it")


# dliobench kvcache's options: (upstream's flag, key, kind for argparse). Kinds: int, float,
# str, flag (store_true). Each sets kvcache.<key>.
UPSTREAM_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--model", "model", "str"), ("--num-users", "num_users", "int"),
    ("--duration", "duration", "float"), ("--max-requests", "max_requests", "int"),
    ("--gpu-mem-gb", "gpu_mem_gb", "float"), ("--cpu-mem-gb", "cpu_mem_gb", "float"),
    ("--num-gpus", "num_gpus", "int"), ("--tensor-parallel", "tensor_parallel", "int"),
    ("--storage-capacity-gb", "storage_capacity_gb", "float"),
    ("--cache-dir", "cache_dir", "str"), ("--generation-mode", "generation_mode", "str"),
    ("--max-concurrent-allocs", "max_concurrent_allocs", "int"),
    ("--disable-multi-turn", "disable_multi_turn", "flag"),
    ("--disable-prefix-caching", "disable_prefix_caching", "flag"),
    ("--seed", "seed", "int"), ("--request-rate", "request_rate", "float"),
    ("--enable-autoscaling", "enable_autoscaling", "flag"),
    ("--autoscaler-mode", "autoscaler_mode", "str"),
    ("--performance-profile", "performance_profile", "str"),
    ("--dataset-path", "dataset_path", "str"),
    ("--max-conversations", "max_conversations", "int"),
    ("--io-depth", "io_depth", "int"), ("--gpu-bandwidth-gbps", "gpu_bandwidth_gbps", "float"),
    ("--entry-scale", "entry_scale", "float"),
)


def overrides_from(values: dict[str, object]) -> list[str]:
    """``kvcache.KEY=VALUE`` overrides for the flags given (``values``: argparse's
    namespace as a dict, a flag not given being None or False), after the workflow keys that
    make a run a KV-cache run."""
    out = ["workflow.kvcache=true", "workflow.train=false", "workflow.generate_data=false"]
    output = values.get("kv_output")
    if output:  # upstream's --output names a JSON file; ours a results folder
        out.append(f"kvcache.output_json={output}" if str(output).endswith(".json")
                   else f"output.folder={output}")
    for _flag, name, kind in UPSTREAM_FLAGS:
        value = values.get(f"kv_{name}")
        if value is None or (kind == "flag" and not value):
            continue
        out.append(f"kvcache.{name}={value}")
    return out
