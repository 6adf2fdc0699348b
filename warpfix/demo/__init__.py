"""``make demo``: warpfix end to end on a bundled buggy training project (``example/``)."""
