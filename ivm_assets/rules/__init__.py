"""Incremental rules written once (:mod:`~ivm_assets.rules.rel`, a small relational IR) and
rendered by both engines: Spark (:mod:`~ivm_assets.rules.render_spark`) and DuckDB over Arrow
(:mod:`~ivm_assets.local.render_duckdb`)."""
