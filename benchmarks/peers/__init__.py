"""dliobench against DLIO 2.0.0 and mlpstorage's own tools."""
