"""The incremental operators, one module per family, each with its rule on changes written
once as IR (:mod:`ivm_assets.ir.rel`) and its binding written once against
:class:`~.binding.EpochBinding`, for both engines (:mod:`ivm_assets.render`).
:mod:`.incrementalize` turns an ordinary plan into a dataflow of them."""
