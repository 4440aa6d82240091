"""The SQL dialect views are parsed and regenerated in: Spark's, with the functions sqlglot
would rewrite into something Spark computes differently kept exactly as written.

The engine does not run the text of a view: it parses it with sqlglot, qualifies and lowers
it, and hands Spark (and DuckDB) regenerated SQL for each expression. sqlglot normalizes
functions on the way, and some normalizations change Spark's answer: an explicit pattern
equal to the "default" one is dropped (``to_date(s, 'yyyy-MM-dd')`` becomes ``TO_DATE(s)``,
but Spark parses strictly with a pattern and leniently without: ``' 2020-02-29'`` and
``'2020-1-5'`` are NULL with it and dates without); ``to_char(d, '999.99')`` becomes a plain
CAST; ``log10(x)`` becomes ``LOG(10, x)``, which rounds differently (``log10(1000)`` is 3.0,
``log(10, 1000)`` 2.9999999999999996); date and time patterns are translated to strftime
and back. Here those functions parse as plain calls and are regenerated as written, and
``''`` inside a string literal is a quote, as in Spark.
``tests/sql/test_regenerated_sql.py`` compares Spark's answer to the SQL as written with its
answer to the regenerated SQL over adversarial values, for the constructs of the SQL
support matrix.

>>> import sqlglot
>>> sqlglot.parse_one("SELECT to_date(s, 'yyyy-MM-dd'), log10(x) FROM t", read=DIALECT).sql(DIALECT)
"SELECT TO_DATE(s, 'yyyy-MM-dd'), LOG10(x) FROM t"
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark

# Functions regenerated exactly as written: those taking a date/time or number pattern, and
# the logarithms sqlglot turns into LOG(base, x).
VERBATIM = (
    "TO_DATE", "TO_TIMESTAMP", "TRY_TO_TIMESTAMP", "TO_TIMESTAMP_NTZ", "TO_TIMESTAMP_LTZ", "TO_UNIX_TIMESTAMP",
    "UNIX_TIMESTAMP", "FROM_UNIXTIME", "DATE_FORMAT", "TO_CHAR", "TO_VARCHAR", "TO_NUMBER", "TRY_TO_NUMBER",
    "LOG10", "LOG2",
)


def _as_written(name: str):
    def build(args: list) -> exp.Expression:
        return exp.Anonymous(this=name.lower(), expressions=args)

    return build


class IvmSpark(Spark):
    """Spark SQL, with :data:`VERBATIM` functions kept as written (see the module doc)."""

    class Tokenizer(Spark.Tokenizer):
        # Spark reads '' inside a string literal as one quote ('yyyy-MM-dd''T''HH:mm' is a
        # pattern with a quoted T); sqlglot's Spark reads it as two adjacent literals,
        # concatenated: the T unquoted.
        STRING_ESCAPES = [*Spark.Tokenizer.STRING_ESCAPES, "'"]

    class Parser(Spark.Parser):
        FUNCTIONS = {**Spark.Parser.FUNCTIONS, **{name: _as_written(name) for name in VERBATIM}}


DIALECT = IvmSpark
