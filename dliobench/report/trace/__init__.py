"""Traces of a training job's I/O read back: strace's and DFTracer's (and ours, which
``run --trace-io`` writes through ``storage/traced.py`` and ``storage/trace_writer.py``),
turned into a workload (``workload from-trace``: ``infer``, ``datafiles``, ``workload``)
and compared with a replay (``workload compare``: ``compare``). See docs/trace.md.
"""
