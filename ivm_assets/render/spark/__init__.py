"""Epochs in Spark: :mod:`.binding` (the operators' bindings over lazy DataFrames, and
:func:`~.binding.spark_change`, an operator's change), :mod:`.rel` (the IR as DataFrames),
:mod:`.keying` (buckets and NULL keys of change sets), :mod:`.inner_join` (the inner join's
own step). Session handling is :mod:`ivm_assets.spark`'s."""
