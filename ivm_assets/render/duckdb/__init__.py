"""Small epochs in process, DuckDB over Arrow, no Spark job: :mod:`.epoch` (the epoch: each
operator's binding run from the root down, and the state helpers), :mod:`.binding` (this
engine's side of the binding protocol), :mod:`.rel` (the IR as one DuckDB query),
:mod:`.expressions` (a view's Spark SQL as DuckDB SQL computing the same value, with its
function families in :mod:`.text_functions`, :mod:`.regex_functions`, :mod:`.date_functions`,
:mod:`.number_functions`, :mod:`.casts`, :mod:`.window_functions` and :mod:`.division`),
:mod:`.columns` (Arrow helpers) and :mod:`.spark_hash` (Spark's bucket hash on the driver)."""
