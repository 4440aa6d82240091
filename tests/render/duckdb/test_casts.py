"""Casts computed in process (:mod:`ivm_assets.render.duckdb.casts`) give Spark's value and type
wherever DuckDB answers, with ANSI mode on and off; every other value fails in DuckDB (the
epoch then runs in Spark, which gives its NULL, wrapped value or error).

Each cast is evaluated by DuckDB one row at a time over adversarial values, then by Spark
over the same rows (``spark_values.py``)."""

from __future__ import annotations

import pytest

from ivm_assets.render.duckdb.expressions import translate
from ivm_assets.errors import Untranslatable
from tests.render.duckdb import spark_values

CASTS = [
    "CAST(`s` AS INT)", "CAST(`s` AS BIGINT)", "CAST(`s` AS TINYINT)", "CAST(`s` AS DECIMAL(10, 2))", "CAST(`s` AS DECIMAL(5, 0))",
    "CAST(`s` AS DECIMAL)", "CAST(`s` AS DOUBLE)", "CAST(`s` AS DATE)", "to_date(`s`)", "TRY_CAST(`s` AS INT)", "`s`::bigint",
    "CAST(`i` AS TINYINT)", "CAST(`i` AS SMALLINT)", "CAST(`i` AS BIGINT)", "CAST(`i` AS DECIMAL(5, 2))", "CAST(`i` AS DECIMAL(20, 0))",
    "CAST(`i` AS DOUBLE)", "CAST(`i` AS STRING)",
    "CAST(`b` AS INT)", "CAST(`b` AS DOUBLE)", "CAST(`b` AS STRING)", "CAST(`b` AS DECIMAL(19, 0))",
    "CAST(`d` AS INT)", "CAST(`d` AS BIGINT)", "CAST(`d` AS TINYINT)", "CAST(`d` AS DECIMAL(4, 1))", "CAST(`d` AS DECIMAL(38, 10))",
    "CAST(`d` AS DOUBLE)", "CAST(`d` AS STRING)", "CAST(`d` AS DECIMAL)", "CAST(`d` * 3 AS DECIMAL(12, 1))",
    "CAST(`w` AS BIGINT)", "CAST(`w` AS DECIMAL(20, 2))", "CAST(`w` AS STRING)", "CAST(`tiny` AS STRING)",
    "CAST(`i` AS VARCHAR(3))", "CAST(`d` AS CHAR(2))",
    "CAST(`f` AS INT)", "CAST(`f` AS BIGINT)", "CAST(`f` AS SMALLINT)", "CAST(`r` AS DOUBLE)", "CAST(`r` AS INT)", "CAST(`r` AS BIGINT)",
    "CAST(`day` AS STRING)", "CAST(`ts` AS DATE)", "to_date(`ts`)", "date_add(`ts`, 1)", "date_sub(`ts`, 40)",
    "CAST(`flag` AS STRING)", "CAST(NULL AS INT)",
    "CAST(`s` AS BOOLEAN)", "CAST(`i` AS BOOLEAN)", "CAST(`d` AS BOOLEAN)", "CAST(`f` AS BOOLEAN)", "CAST(`r` AS BOOLEAN)",
    "CAST(`flag` AS INT)", "CAST(`flag` AS DOUBLE)", "CAST(`flag` AS BOOLEAN)", "to_date(`s`, 'yyyy-MM-dd')",
    "CAST(`i` AS FLOAT)", "CAST(`b` AS FLOAT)", "CAST(`f` AS FLOAT)", "CAST(`r` AS FLOAT)", "CAST(1 AS FLOAT)",
]


@pytest.fixture(scope="module")
def answers(spark):
    return spark_values.answers(spark, CASTS)


@pytest.mark.parametrize("sql", CASTS)
def test_a_cast_answered_in_process_is_sparks_in_both_ansi_modes(answers, sql):
    found, spark_type, ours, _, _ = answers[sql]
    assert spark_values.family(spark_type) == spark_values.spark_type(found)
    assert any(not failed for _, failed in ours), f"{sql}: DuckDB answered no row"
    for ansi, wrong in spark_values.wrong_answers(answers[sql]).items():
        assert not wrong, f"{sql} with ANSI {ansi}: (row, in process, Spark) {wrong}"


def test_no_cast_fails_on_nulls():
    assert spark_values.failing_on_nulls(CASTS) == []


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("CAST(`f` AS DECIMAL(10, 2))", "casts of a double"),
        ("CAST(`f` AS STRING)", "casts of a double"),
        ("CAST(`r` AS DECIMAL(10, 2))", "casts of a float"),
        ("CAST(`d` AS FLOAT)", "casts of a DECIMAL to FLOAT"),
        ("CAST(`s` AS FLOAT)", "casts of a string to FLOAT"),
        ("CAST(`flag` AS DECIMAL(3, 0))", "casts of a boolean"),
        ("CAST(`w` AS DOUBLE)", "widened to DOUBLE"),
        ("to_date(`s`, 'dd/MM/yyyy')", "TO_DATE with a pattern other than"),
        ("to_date(`ts`, 'yyyy-MM-dd')", "TO_DATE with a pattern over a timestamp"),
    ],
)
def test_casts_outside_the_rules_are_refused(sql, construct):
    with pytest.raises(Untranslatable, match=construct):
        translate(sql, spark_values.TYPES)
