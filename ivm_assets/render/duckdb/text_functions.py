"""String functions that DuckDB evaluates exactly as Spark does, for
:mod:`ivm_assets.render.duckdb.expressions` (whose translator takes these visits): each gives
Spark's value row for row, or refuses the construct (:class:`Untranslatable`), or, where
only some values differ, fails on those values in DuckDB so that the epoch goes to Spark.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ivm_assets.render.duckdb.number_functions import literal_int
from ivm_assets.ir.types import BOOL, SqlType
from ivm_assets.errors import Untranslatable

_STRING = SqlType("string")
_INT = SqlType("number", 10, 0, integer=True)


class TextFunctions:
    """Visits of string functions, taken by the translator of
    :mod:`ivm_assets.render.duckdb.expressions`, whose ``_operand`` (an operand translated and
    checked to be of a family) they call."""

    def visit_Substring(self, node: exp.Substring) -> tuple[str, SqlType]:
        """``substring(s, pos[, len])`` with a literal position of at least 0 and a literal
        length of at least 0: both engines count code points from 1 alike. Negative
        positions or lengths differ between them: refused."""
        start, length = node.args.get("start"), node.args.get("length")
        literals = [a for a in (start, length) if a is not None]
        if start is None or not all(isinstance(a, exp.Literal) and not a.is_string and re.fullmatch(r"\d+", a.this) for a in literals):
            raise Untranslatable(f"SUBSTRING with a position or length other than a plain literal ({node.sql('spark')})")
        x, _ = self._operand(node.this, "string", "SUBSTRING")
        # Spark reads position 0 as 1 (UTF8String.substringSQL); DuckDB's range would start
        # before the first character and take one fewer.
        return f"substring({x}, {', '.join([str(max(int(start.this), 1)), *(a.this for a in literals[1:])])})", _STRING

    def visit_Length(self, node: exp.Length) -> tuple[str, SqlType]:
        """``length(s)`` of a string: code points in both engines (an emoji is one, e + a
        combining accent two), trailing spaces counted; Spark's INT."""
        x, _ = self._operand(node.this, "string", "LENGTH")
        return f"CAST(length({x}) AS INTEGER)", _INT

    def visit_Concat(self, node: exp.Concat) -> tuple[str, SqlType]:
        """``concat(a, b, …)`` of strings: NULL when any part is NULL, as Spark's is
        (DuckDB's ``concat`` skips NULLs; its ``||`` does not)."""
        parts = [self._operand(e, "string", "CONCAT")[0] for e in node.expressions]
        return f"({' || '.join(parts)})", _STRING

    def visit_DPipe(self, node: exp.DPipe) -> tuple[str, SqlType]:
        parts = [self._operand(e, "string", "||")[0] for e in (node.this, node.expression)]
        return f"({' || '.join(parts)})", _STRING

    def visit_ConcatWs(self, node: exp.ConcatWs) -> tuple[str, SqlType]:
        """``concat_ws(sep, s, …)`` of strings: NULL parts skipped, NULL when the separator
        is, in both. Spark also takes arrays and casts other values to strings: refused."""
        parts = [self._operand(e, "string", "CONCAT_WS")[0] for e in node.expressions]
        if len(parts) < 2:
            raise Untranslatable("CONCAT_WS of a separator alone")
        return f"concat_ws({', '.join(parts)})", _STRING

    def _ends(self, node: exp.Expression, call: str) -> tuple[str, SqlType]:
        """``left(s, n)``/``right(s, n)`` with a literal ``n`` of at least 0: code points in both."""
        n = node.expression
        if not (isinstance(n, exp.Literal) and not n.is_string and n.this.isdigit()):
            raise Untranslatable(f"{call.upper()} with a length other than a plain literal ({node.sql('spark')})")
        x, _ = self._operand(node.this, "string", call.upper())
        return f"{call}({x}, {n.this})", _STRING

    def visit_Left(self, node: exp.Left) -> tuple[str, SqlType]:
        return self._ends(node, "left")

    def visit_Right(self, node: exp.Right) -> tuple[str, SqlType]:
        return self._ends(node, "right")

    def _test(self, node: exp.Expression, call: str) -> tuple[str, SqlType]:
        """``startswith``/``endswith``/``contains`` of strings: a byte comparison in both
        (no collation), TRUE for an empty pattern, NULL with a NULL."""
        (x, _), (pattern, _) = (self._operand(e, "string", call.upper()) for e in (node.this, node.expression))
        return f"{call}({x}, {pattern})", BOOL

    def visit_StartsWith(self, node: exp.StartsWith) -> tuple[str, SqlType]:
        return self._test(node, "starts_with")

    def visit_EndsWith(self, node: exp.EndsWith) -> tuple[str, SqlType]:
        return self._test(node, "ends_with")

    def visit_Contains(self, node: exp.Contains) -> tuple[str, SqlType]:
        return self._test(node, "contains")

    def visit_Replace(self, node: exp.Replace) -> tuple[str, SqlType]:
        """``replace(s, search[, replacement])``: every occurrence, left to right, in both; an
        empty search leaves ``s`` as it is; without a replacement the occurrences are removed."""
        args = [node.this, node.expression, node.args.get("replacement") or exp.Literal.string("")]
        x, search, replacement = (self._operand(e, "string", "REPLACE")[0] for e in args)
        return f"replace({x}, {search}, {replacement})", _STRING

    def visit_Trim(self, node: exp.Trim) -> tuple[str, SqlType]:
        """``trim(s)``, ``ltrim``/``rtrim`` and ``trim(LEADING|TRAILING FROM s)``: spaces
        (U+0020) only, as Spark trims; other characters to trim are refused."""
        if node.args.get("expression") is not None or node.args.get("collation") is not None:
            raise Untranslatable(f"TRIM of other characters than spaces ({node.sql('spark')})")
        x, _ = self._operand(node.this, "string", "TRIM")
        call = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get((node.args.get("position") or "BOTH").upper(), "trim")
        return f"{call}({x}, ' ')", _STRING

    def visit_Upper(self, node: exp.Upper) -> tuple[str, SqlType]:
        return self._case_mapped(node, "upper")

    def visit_Lower(self, node: exp.Lower) -> tuple[str, SqlType]:
        return self._case_mapped(node, "lower")

    def visit_Initcap(self, node: exp.Initcap) -> tuple[str, SqlType]:
        """``initcap(s)`` of ASCII text: lower case, then the first letter after each space
        upper case (only a space starts a word, as in Spark's ``toTitleCase``; sqlglot
        writes that delimiter as the node's second argument, any other is refused). Spark
        maps letters outside ASCII by its own rules: such a value fails in DuckDB (see
        ``upper``)."""
        delimiter = node.args.get("expression")
        if delimiter is not None and not (isinstance(delimiter, exp.Literal) and delimiter.is_string and delimiter.this == " "):
            raise Untranslatable(f"INITCAP with delimiters ({node.sql('spark')})")
        x, _ = self._operand(node.this, "string", "INITCAP")
        guard = "error('INITCAP of text outside ASCII: case mappings differ')"
        words = f"list_transform(string_split(lower({x}), ' '), lambda w: upper(w[1:1]) || w[2:])"
        return f"(CASE WHEN strlen({x}) <> length({x}) THEN {guard} ELSE array_to_string({words}, ' ') END)", _STRING

    def _case_mapped(self, node: exp.Expression, name: str) -> tuple[str, SqlType]:
        """``upper(s)`` / ``lower(s)`` of ASCII text, where both engines map A–Z and a–z
        alike. Beyond ASCII they differ (``upper('straße')`` is STRASSE in Spark, STRAẞE in
        DuckDB): a value with a character outside ASCII (its bytes outnumber its characters)
        fails in DuckDB, and the epoch goes to Spark."""
        x, _ = self._operand(node.this, "string", name.upper())
        guard = f"error('{name.upper()} of text outside ASCII: case mappings differ')"
        return f"(CASE WHEN strlen({x}) <> length({x}) THEN {guard} ELSE {name}({x}) END)", _STRING

    def _count(self, node: exp.Expression, what: str) -> str:
        """An INT argument (a count or a length) given as a literal, as dashboards pad and
        repeat. A column could hold 2^31 − 1, a string of gigabytes in either engine (Spark's
        driver dies of it): refused, as is a number wider than INT (Spark casts it by rules
        that depend on ANSI mode)."""
        refusal = f"{what} by a count other than an INT literal ({node.sql('spark')})"
        n = literal_int(node, refusal)
        if abs(n) >= 2**31:
            raise Untranslatable(refusal)
        return str(n)

    def visit_Pad(self, node: exp.Pad) -> tuple[str, SqlType]:
        """``lpad``/``rpad(s, n[, pad])``: ``s`` cut to ``n`` code points, or padded to them by
        repeats of ``pad`` (a space by default), cut at the end; '' for ``n`` ≤ 0, in both.
        With an empty ``pad`` Spark returns a shorter ``s`` as it is, DuckDB raises: the
        epoch then runs in Spark."""
        x, _ = self._operand(node.this, "string", "LPAD/RPAD")
        n = self._count(node.expression, "LPAD/RPAD")
        pad, _ = self._operand(node.args.get("fill_pattern") or exp.Literal.string(" "), "string", "LPAD/RPAD")
        return f"{'lpad' if node.args.get('is_left') else 'rpad'}({x}, {n}, {pad})", _STRING

    def visit_StrPosition(self, node: exp.StrPosition) -> tuple[str, SqlType]:
        """``instr(s, sub)``, ``locate(sub, s)``, ``position(sub IN s)``: the code point where
        ``sub`` first starts, counted from 1, 0 when it does not occur, 1 for an empty
        ``sub``; Spark's INT. ``locate`` from a position other than 1 is refused (Spark's
        answer for an empty ``sub`` there is 1, wherever it starts)."""
        start = node.args.get("position")
        if start is not None and not (isinstance(start, exp.Literal) and not start.is_string and start.this == "1"):
            raise Untranslatable(f"LOCATE from a position other than 1 ({node.sql('spark')})")
        (x, _), (sub, _) = (self._operand(e, "string", "INSTR/LOCATE") for e in (node.this, node.args["substr"]))
        return f"CAST(instr({x}, {sub}) AS INTEGER)", _INT

    def visit_Repeat(self, node: exp.Repeat) -> tuple[str, SqlType]:
        """``repeat(s, n)``: ``s`` n times, '' for n ≤ 0, in both."""
        x, _ = self._operand(node.this, "string", "REPEAT")
        return f"repeat({x}, {self._count(node.args['times'], 'REPEAT')})", _STRING

    def visit_Reverse(self, node: exp.Reverse) -> tuple[str, SqlType]:
        """``reverse(s)``: Spark reverses code points, DuckDB grapheme clusters (an e and its
        combining accent stay in order): a value outside ASCII fails in DuckDB, and the epoch
        goes to Spark."""
        x, _ = self._operand(node.this, "string", "REVERSE")
        guard = "error('REVERSE of text outside ASCII: code points and graphemes differ')"
        return f"(CASE WHEN strlen({x}) <> length({x}) THEN {guard} ELSE reverse({x}) END)", _STRING
