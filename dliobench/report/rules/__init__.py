"""MLPerf Storage's rules applied to dliobench results (``dliobench check``).

``finding`` (a check's outcome and the rule it cites), ``subject`` (a run as the checks see
it), one module per group of checks (``training``, ``division``, ``runset``), ``registry``
(which checks apply, by workload family) and ``render`` (the table and JSON).
"""
