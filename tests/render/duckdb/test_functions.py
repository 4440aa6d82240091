"""Numeric, date/time and string functions computed in process
(:mod:`ivm_assets.render.duckdb.number_functions`, :mod:`~ivm_assets.render.duckdb.date_functions`,
:mod:`~ivm_assets.render.duckdb.text_functions`) give Spark's value and type wherever DuckDB answers,
with ANSI mode on and off and in three session zones; every other value fails in DuckDB
(the epoch then runs in Spark). Checked value by value over adversarial rows
(``spark_values.py``)."""

from __future__ import annotations

import pytest

from ivm_assets.render.duckdb.expressions import translate
from ivm_assets.errors import Untranslatable
from tests.render.duckdb import spark_values

NUMBERS = [
    "abs(`i`)", "abs(`b`)", "abs(`d`)", "abs(`w`)", "abs(`f`)", "abs(CAST(`i` AS TINYINT))",
    "round(`i`)", "round(`b`, 2)", "round(`d`)", "round(`d`, 1)", "round(`d`, 3)", "round(`d`, -1)", "round(`d`, -12)",
    "round(`w`, 2)", "round(`w`)", "round(`tiny`, 7)", "round(`f`)", "round(`f`, 2)", "round(`f`, -1)", "round(`f`, 5)", "round(`f`, 20)", "round(`f`, -20)",
    "bround(`d`, 1)", "bround(`d`)", "bround(`f`, 2)", "bround(`f`)", "bround(`i`, 1)", "round(`i`, -1)", "round(`b`, -3)", "bround(`i`, -1)", "round(CAST(`i` AS TINYINT), -2)", "round(`i`, -12)",
    "floor(`i`)", "ceil(`b`)", "floor(`d`)", "ceil(`d`)", "floor(`w`)", "ceil(`tiny`)", "floor(`f`)", "ceil(`f`)",
    "pmod(`i`, 7)", "pmod(`i`, -7)", "pmod(`b`, `i`)", "pmod(CAST(`i` AS SMALLINT), CAST(-3 AS SMALLINT))",
    "CASE `i` WHEN 0 THEN 'zero' WHEN 42 THEN 'answer' ELSE 'other' END", "CASE `s` WHEN `u` THEN 1 WHEN 'abc' THEN 2 END",
    "CASE `f` WHEN 0 THEN 'zero' WHEN -1.5 THEN 'neg' END",
    "`i` % 7", "`b` % `i`", "`i` % -1", "CAST(`i` AS TINYINT) % CAST(3 AS TINYINT)", "`f` % 2.5", "`f` % `f`", "`i` % `f`", "-`f` % 3",
    "greatest(`i`, `b`)", "least(`i`, `d`, 0)", "greatest(`f`, 0)", "least(`f`, -0.0)", "greatest(`d`, `f`)", "greatest(`s`, `u`)",
    "least(`day`, DATE'2000-01-01')", "greatest(`i`, NULL)", "greatest(-0.0, `f`)",
    "IF(`i` > 0, `i`, `b`)", "IF(`flag`, `d`, `f`)", "IF(`flag`, `s`, NULL)", "nvl2(`s`, `i`, `d`)",
    "try_divide(`i`, `b`)", "try_divide(`d`, `i`)", "try_divide(`f`, `d`)", "try_divide(`w`, `tiny`)",
    "isnan(`f`)", "isnan(`r`)", "isnan(`i`)", "isnan(`d`)",
    "`f` + `r`", "`r` * `f`", "`f` - `r`", "`r` / `f`", "`f` = `r`", "`r` <= `f`", "`r` <=> `f`",
    "CASE WHEN `i` > 0 THEN `r` ELSE `f` END", "COALESCE(`r`, `f`)", "greatest(`f`, `r`)", "least(`r`, `f`, 0)", "CASE WHEN `flag` THEN `r` WHEN `i` > 1 THEN `i` ELSE `f` END",
]
TIMES = [
    "hour(`ts`)", "minute(`ts`)", "second(`ts`)", "hour(`ntz`)", "second(`ntz`)",
    "dayofweek(`day`)", "dayofweek(`ts`)", "dayofyear(`day`)", "weekofyear(`day`)", "weekofyear(`ts`)",
    "EXTRACT(YEAR FROM `ts`)", "EXTRACT(HOUR FROM `ts`)", "EXTRACT(DAYOFWEEK FROM `day`)", "EXTRACT(WEEK FROM `ntz`)",
    "datediff(`day`, DATE'2000-01-01')", "datediff(`ts`, `day`)", "datediff(`ntz`, `ts`)",
    "last_day(`day`)", "last_day(`ts`)", "add_months(`day`, 1)", "add_months(`day`, -13)", "add_months(`ts`, `i`)",
    "trunc(`day`, 'MM')", "trunc(`day`, 'YEAR')", "trunc(`day`, 'WEEK')", "trunc(`ts`, 'QUARTER')",
    "date_trunc('MONTH', `ts`)", "date_trunc('DAY', `ts`)", "date_trunc('HOUR', `ts`)", "date_trunc('WEEK', `ts`)",
    "date_trunc('YEAR', `day`)", "date_trunc('DD', `ntz`)", "date_trunc('MINUTE', `ntz`)", "date_trunc('QUARTER', `ts`)",
    "date_trunc('SECOND', `ts`)",
    "date_format(`ts`, 'yyyy-MM')", "date_format(`day`, 'MMM d, yyyy')", "date_format(`ntz`, 'EEE HH:mm:ss')",
    "date_format(`ts`, 'yy/M/d h:mm a')", "date_format(`ts`, 'EEEE MMMM ''''yy')", "date_format(`day`, 'yyyy ''week'' d')",
    "date_format(`ts`, 'yyyy-MM-dd HH:mm:ss.SSS')", "date_format(`ntz`, 'HH:mm:ss.SSSSSS')",
    "CAST(`ts` AS STRING)", "CAST(`ntz` AS STRING)",
    "CAST(`day` AS TIMESTAMP)", "CAST(`ntz` AS TIMESTAMP)", "CAST(`ts` AS TIMESTAMP_NTZ)", "CAST(`day` AS TIMESTAMP_NTZ)",
    # A DATE compared with a timestamp is its midnight (in the session zone beside a TIMESTAMP).
    "`day` < `ts`", "`ts` >= `day`", "`day` = `ntz`", "`ntz` <= `day`", "`day` BETWEEN `ts` AND `ntz`",
    "`ts` IN (`day`, DATE'2018-11-04')", "`day` <=> date_trunc('DAY', `ts`)",
    "`ntz` < `ts`", "`ts` = `ntz`", "`ts` BETWEEN `day` AND `ntz`", "`ntz` IN (`ts`, `day`)", "date_trunc('HOUR', `ntz`)",
    "CAST(date_trunc('HOUR', `ntz`) AS STRING)", "date_format(`ntz`, 'yyyy-MM-dd HH:mm')",
    # Timestamp literals: wall times made instants in the session zone (23:30 on 2018-02-17
    # comes twice in São Paulo; 00:30 on 2018-11-04 never does).
    "TIMESTAMP '2018-02-17 23:30:00' = `ts`", "`ts` < TIMESTAMP '2018-02-17 23:30'", "`ts` >= CAST('2018-11-04 00:30:00.25' AS TIMESTAMP)",
    "`ntz` <= TIMESTAMP_NTZ '2018-02-17 23:30:00'", "date_trunc('HOUR', TIMESTAMP '2018-02-17 23:30:00') < `ts`",
    "`day` < TIMESTAMP '1994-01-01 12:00'",
]
TEXTS = [
    "concat_ws('-', `s`, `u`)", "concat_ws(`u`, `s`, 'x')", "concat_ws(', ', `u`)",
    "left(`u`, 2)", "right(`u`, 2)", "left(`s`, 0)", "replace(`u`, 'b', '')", "replace(`u`, '', 'x')", "replace(`s`, '1', `u`)",
    "replace(`u`, 'é')", "startswith(`u`, 'h')", "endswith(`u`, '😀')", "contains(`u`, `s`)", "contains(`u`, '')",
    "lpad(`u`, 6, 'é😀')", "rpad(`u`, 3)", "lpad(`s`, 3, '0')", "rpad(`u`, 0, 'x')", "lpad(`u`, 4, '')", "rpad(`s`, 5, `u`)",
    "lpad(`u`, -2, 'x')", "instr(`u`, 'b')", "instr(`u`, '')", "instr(`s`, `u`)", "locate('é', `u`)", "position('😀' IN `u`)",
    "locate('a', `u`, 1)", "repeat(`u`, 2)", "repeat(`s`, 3)", "repeat(`u`, -1)", "reverse(`u`)", "reverse(`s`)",
    "initcap(`s`)", "initcap(`u`)",
]
# Java's regular expressions as RE2 matches them (line terminators, \s, $ before a final
# terminator, empty matches, lazy repetition, groups that take no part).
REGEXES = [
    "`s` RLIKE '^[0-9]+$'", "`s` RLIKE '^-?\\\\d+(\\\\.\\\\d+)?$'", "`s` RLIKE 'a.b'", "`s` RLIKE '\\\\s'", "`u` RLIKE '^.{3}$'",
    "`s` RLIKE '[^a-z0-9]'", "regexp(`s`, 'b$')", "`u` RLIKE 'é|😀'", "`s` RLIKE '(?:ab|a)+[\\\\s\\\\-]'",
    "regexp_extract(`s`, '([0-9]+)\\\\.?([0-9]*)', 1)", "regexp_extract(`s`, '([0-9]+)\\\\.?([0-9]*)', 2)",
    "regexp_extract(`s`, '(a)|(b)', 2)", "regexp_extract(`s`, '(.*?)(\\\\d)', 1)", "regexp_extract(`s`, '^(.*)$', 1)",
    "regexp_extract(`u`, '[a-z]+', 0)", "regexp_extract(`s`, '(\\\\w+)\\\\s+(\\\\w+)')",
    "regexp_replace(`s`, '[0-9]', '#')", "regexp_replace(`s`, 'x+', '-')", "regexp_replace(`s`, '\\\\s+', ' ')",
    "regexp_replace(`u`, '.', '.')", "regexp_replace(`s`, '0+|l', '')", "regexp_replace(`s`, '(a|ab)(c|bcd)?', 'Z')",
]
ZONES = ["UTC", "America/Sao_Paulo", "Asia/Kolkata"]


@pytest.fixture(scope="module")
def answers(spark):
    found = {}
    for zone in ZONES:
        expressions = TIMES if zone != "UTC" else NUMBERS + TEXTS + REGEXES + TIMES
        found.update({(zone, sql): answer for sql, answer in spark_values.answers(spark, expressions, zone).items()})
    return found


@pytest.mark.parametrize(("zone", "sql"), [("UTC", sql) for sql in NUMBERS + TEXTS + REGEXES] + [(zone, sql) for zone in ZONES for sql in TIMES])
def test_a_function_answered_in_process_is_sparks_in_both_ansi_modes(answers, zone, sql):
    answer = answers[(zone, sql)]
    found, spark_type, ours, _, _ = answer
    assert spark_values.family(spark_type) == spark_values.spark_type(found)
    assert any(not failed for _, failed in ours), f"{sql}: DuckDB answered no row"
    for ansi, wrong in spark_values.wrong_answers(answer).items():
        assert not wrong, f"{sql} in {zone} with ANSI {ansi}: (row, in process, Spark) {wrong}"


def test_no_function_fails_on_nulls():
    """A NULL argument gives Spark's NULL (or value) in DuckDB too, not a guard's failure:
    ``date_format``'s year guard once failed on NULL, sending such epochs to Spark."""
    assert spark_values.failing_on_nulls(NUMBERS + TEXTS + REGEXES + TIMES) == []


def test_doubles_nearest_a_tie_are_left_to_spark(answers):
    """2.675 is the DOUBLE nearest 2.675: rounded to two places, its value depends on the
    decimal form Java writes, so it fails in DuckDB; 0.125 is exact, and rounds (half up)."""
    _, _, ours, _, _ = answers[("UTC", "round(`f`, 2)")]
    values = spark_values.ROWS.column("f").to_pylist()
    assert ours[values.index(2.675)][1] and not ours[values.index(0.125)][1]


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("round(`d`, `i`)", "ROUND with a scale other than an integer literal"),
        ("round(`r`)", "ROUND over a float"),
        ("floor(`d`, 1)", "FLOOR with a scale"),
        ("`d` % 3", "a DECIMAL remainder"),
        ("greatest(`r`, `r`)", "GREATEST of FLOATs"),
        ("greatest(`i`, `s`)", "mixes number and string"),
        ("pmod(`d`, 3)", "PMOD of DECIMALs"),
        ("CASE `i` WHEN 'a' THEN 1 END", "compares or mixes number and string"),
        ("hour(`day`)", "HOUR over a date"),
        ("date_trunc('FORTNIGHT', `ts`)", "DATE_TRUNC with the unit"),
        ("trunc(`day`, 'DAY')", "TRUNC with the unit"),
        ("EXTRACT(SECOND FROM `ts`)", "EXTRACT with the unit"),
        ("date_format(`ts`, 'HH:mm:ss.SS')", "the pattern 'HH:mm:ss.SS': SS"),
        ("date_format(`ts`, `s`)", "DATE_FORMAT with a pattern other than a string literal"),
        ("date_format(`s`, 'yyyy')", "DATE_FORMAT over a string"),
        ("concat_ws('-', `i`)", "CONCAT_WS over a number"),
        ("left(`u`, `i`)", "LEFT with a length other than a plain literal"),
        ("lpad(`u`, `i`, 'x')", "LPAD/RPAD by a count other than an INT literal"),
        ("repeat(`u`, 2.5)", "REPEAT by a count other than an INT literal"),
        ("repeat(`u`, 2147483648)", "REPEAT by a count other than an INT literal"),
        ("locate('a', `u`, 2)", "LOCATE from a position other than 1"),
        ("`s` RLIKE '(?i)abc'", "flags, lookaround or named groups"),
        ("`s` RLIKE 'a(?=b)'", "flags, lookaround or named groups"),
        ("`s` RLIKE '\\\\bword'", "the escape \\\\b"),
        ("`s` RLIKE '\\\\p{Alpha}'", "the escape \\\\p"),
        ("`s` RLIKE '(a)\\\\1'", "the escape \\\\1"),
        ("`s` RLIKE 'a*+'", "possessive repetition"),
        ("`s` RLIKE '[a-z&&[^b]]'", "a nested class or an intersection"),
        ("`s` RLIKE '$a'", "other than at its end"),
        ("regexp_replace(`s`, 'a$', 'b')", "other than at its end"),
        ("regexp_extract(`s`, 'a$', 0)", "other than at its end"),
        ("regexp_replace(`s`, '(a)', '$1')", "a replacement other than a literal"),
        ("regexp_replace(`s`, 'x*', '-')", "a pattern that matches the empty string"),
        ("regexp_replace(`s`, 'a|', '-')", "a pattern that matches the empty string"),
        ("regexp_replace(`s`, 'a{1001}', '-')", "RE2 rejects it"),
        ("`s` RLIKE `u`", "RLIKE with a pattern other than a string literal"),
        ("regexp_extract(`s`, '(a)', `i`)", "REGEXP_EXTRACT with a group other than a literal"),
        ("instr(`i`, '1')", "INSTR/LOCATE over a number"),
        ("COALESCE(`ntz`, `ts`)", "mixes TIMESTAMP and TIMESTAMP_NTZ"),
        ("`ts` < TIMESTAMP '2018-02-17T23:30:00'", "a timestamp text other than"),
        ("`ts` < TIMESTAMP '2023-02-29 00:00:00'", "not a real date and time"),
        ("greatest(`ts`, `ntz`)", "mixes TIMESTAMP and TIMESTAMP_NTZ"),
    ],
)
def test_functions_outside_the_rules_are_refused(sql, construct):
    with pytest.raises(Untranslatable, match=construct):
        translate(sql, spark_values.TYPES)
