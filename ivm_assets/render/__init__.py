"""The two engines that compute the rules (:mod:`ivm_assets.rules`): Spark, as lazy DataFrames
(:mod:`.spark`), and DuckDB over Arrow in process (:mod:`.duckdb`). Each runs the operators'
bindings through its own side of :class:`~ivm_assets.rules.binding.EpochBinding` and renders
the same IR trees (:mod:`ivm_assets.ir.rel`)."""
