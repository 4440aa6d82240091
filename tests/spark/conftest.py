from tests.spark.connect_server import connect_server  # noqa: F401  (the shared session fixture)
