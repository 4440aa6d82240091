"""The classic session's py4j gateway keeps the JVM classes it found by name."""

from __future__ import annotations

from py4j.java_gateway import JavaClass


def test_a_class_found_by_name_is_kept_and_still_called(spark):
    jvm = spark.sparkContext._jvm
    first = jvm.PythonUtils
    assert isinstance(first, JavaClass) and jvm.PythonUtils is first  # one lookup, then an attribute
    assert list(first.toSeq(["a", "b"]).toList().mkString(",")) == list("a,b")
    functions = getattr(jvm, "org.apache.spark.sql.functions")
    assert getattr(jvm, "org.apache.spark.sql.functions") is functions
    assert spark.range(3).selectExpr("sum(id) AS s").first().s == 3
