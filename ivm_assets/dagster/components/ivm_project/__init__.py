"""The ``ivm_assets.IvmProjectComponent`` component."""
