"""Regular expressions that DuckDB (RE2) matches exactly as Spark (``java.util.regex``) does,
for :mod:`ivm_assets.render.duckdb.expressions` (whose translator takes these visits).

The two engines agree on the common core — literals, classes of ASCII ranges, ``\\d``/``\\w``,
groups, alternation, greedy and lazy repetition, ``^`` — where both match code points and
both prefer the leftmost, first-listed alternative. They differ elsewhere, so a pattern is
rewritten where a rewrite gives Java's meaning, and refused otherwise:

- ``.`` is any code point but Java's line terminators (``\\n``, ``\\r``, U+0085, U+2028,
  U+2029); RE2's excludes ``\\n`` only: written as the class Java means;
- ``\\s`` is Java's six characters (with the vertical tab, which RE2's lacks): written out;
- ``$`` also matches before a final line terminator in Java: written as an optional
  terminator and the end of the text. That consumes the terminator, so it is taken only as
  the pattern's last token, and only where the whole match is not used (``rlike``, and
  groups of ``regexp_extract`` other than 0);
- refused: flags (``(?i)`` is ASCII-only in Java, Unicode in RE2), lookaround, named groups,
  back-references, possessive repetition, ``\\b`` (Java's word characters are Unicode
  letters), ``\\p{…}``, ``\\Q…\\E``, nested classes and intersections (``[a[b]]``,
  ``[a&&b]``), ``\\S`` inside a class, any other escape of a letter or digit.

``regexp_replace`` takes a literal replacement without ``$`` or ``\\`` (Java reads group
references and escapes in it, RE2 others) and a pattern that cannot match the empty string
(after a match, Java replaces an empty one too, RE2 does not), and replaces every match. A
pattern RE2 rejects (a repetition past 1000) fails in DuckDB, and the epoch goes to Spark.
"""

from __future__ import annotations

import duckdb
from sqlglot import exp

from ivm_assets.duckdb_names import string_literal
from ivm_assets.ir.types import BOOL, SqlType
from ivm_assets.errors import Untranslatable

_STRING = SqlType("string")
# Java's line terminators: what its ``.`` does not match and its ``$`` may precede.
_TERMINATORS = "\\n\\r\\x{85}\\x{2028}\\x{2029}"
_SPACES = "\\t\\n\\x0B\\f\\r "
# Escapes that mean the same in both (outside and inside a class).
_SHARED_ESCAPES = set("dDwWtnrf")
_QUANTIFIERS = set("*+?")


def re2_pattern(pattern: str, *, dollar: bool) -> str:
    """Java's regular expression ``pattern`` as an RE2 pattern matching the same text the same
    way (see the module doc); ``dollar``: a final ``$`` may consume a final line terminator."""
    out: list[str] = []
    k = 0
    while k < len(pattern):
        c = pattern[k]
        if c == "\\":
            out.append(_escape(pattern, pattern[k + 1:k + 2], in_class=False))
            k += 2
        elif c == "[":
            k = _char_class(pattern, k, out)
        elif c == ".":
            out.append(f"[^{_TERMINATORS}]")
            k += 1
        elif c == "$":
            if not dollar or k != len(pattern) - 1:
                raise Untranslatable(f"the regular expression {pattern!r}: $ other than at its end of an RLIKE or a group extracted")
            out.append(f"(?:\\r\\n|[{_TERMINATORS}])?\\z")
            k += 1
        elif c == "(":
            if pattern.startswith("(?", k) and not pattern.startswith("(?:", k):
                raise Untranslatable(f"the regular expression {pattern!r}: flags, lookaround or named groups (Java and RE2 differ)")
            out.append(c)
            k += 1
        elif c in _QUANTIFIERS or c == "{":
            k = _quantifier(pattern, k, out)
        elif c in "]}":
            raise Untranslatable(f"the regular expression {pattern!r}: an unmatched {c}")
        else:
            out.append(c)
            k += 1
    return "".join(out)


def _escape(pattern: str, escaped: str, *, in_class: bool) -> str:
    """The RE2 form of ``\\`` + ``escaped`` in ``pattern``, inside a class or not: the shared
    escapes and escaped punctuation as they are, ``\\s`` written out; outside a class also
    ``\\S``, ``\\A`` and ``\\z``. Any other is refused."""
    if escaped in _SHARED_ESCAPES or (escaped and escaped.isascii() and not escaped.isalnum()):
        return "\\" + escaped
    if escaped == "s":
        return _SPACES if in_class else f"[{_SPACES}]"
    if not in_class and escaped == "S":
        return f"[^{_SPACES}]"
    if not in_class and escaped in ("A", "z"):
        return "\\" + escaped
    where = " in a class" if in_class else " (Java and RE2 differ)"
    raise Untranslatable(f"the regular expression {pattern!r}: the escape \\{escaped}{where}")


def _quantifier(pattern: str, k: int, out: list[str]) -> int:
    """A repetition at ``k`` (``*``, ``+``, ``?`` or ``{n[,[m]]}``), lazy or greedy; the
    index after it. Possessive ones (a trailing ``+``) have no RE2 form."""
    if pattern[k] == "{":
        end = pattern.find("}", k)
        body = pattern[k + 1:end] if end != -1 else ""
        low, _, high = body.partition(",")
        if not (low.isdigit() and (high == "" or high.isdigit())):
            raise Untranslatable(f"the regular expression {pattern!r}: a {{ that is not a repetition")
        token, k = pattern[k:end + 1], end + 1
    else:
        token, k = pattern[k], k + 1
    if pattern[k:k + 1] == "+":
        raise Untranslatable(f"the regular expression {pattern!r}: possessive repetition")
    if pattern[k:k + 1] == "?":
        token, k = token + "?", k + 1
    out.append(token)
    return k


def _char_class(pattern: str, k: int, out: list[str]) -> int:
    """The class opening at ``k``; the index after its ``]``."""
    parts, i = ["["], k + 1
    if pattern[i:i + 1] == "^":
        parts.append("^")
        i += 1
    if pattern[i:i + 1] in ("]", ""):
        raise Untranslatable(f"the regular expression {pattern!r}: a class that is empty or starts with ]")
    while i < len(pattern) and pattern[i] != "]":
        c = pattern[i]
        if c == "[" or pattern.startswith("&&", i):
            raise Untranslatable(f"the regular expression {pattern!r}: a nested class or an intersection")
        if c == "\\":
            parts.append(_escape(pattern, pattern[i + 1:i + 2], in_class=True))
            i += 2
        else:
            parts.append(c)
            i += 1
    if i >= len(pattern):
        raise Untranslatable(f"the regular expression {pattern!r}: an unclosed class")
    out.append("".join(parts) + "]")
    return i + 1


def _matches_empty(pattern: str) -> bool:
    """Whether RE2 matches the SQL string literal ``pattern`` to the empty string (a pattern
    it rejects is refused: Spark gives its answer or its error)."""
    with duckdb.connect() as con:  # its own: a shared connection is not for concurrent threads
        try:
            return con.execute(f"SELECT regexp_full_match('', {pattern})").fetchone()[0]
        except duckdb.Error as exc:
            raise Untranslatable(f"the regular expression {pattern}: RE2 rejects it ({exc})") from None


class RegexFunctions:
    """Visits of ``rlike``/``regexp``, ``regexp_extract`` and ``regexp_replace`` with literal
    patterns, taken by the translator of :mod:`ivm_assets.render.duckdb.expressions`."""

    def _pattern(self, node: exp.Expression, what: str, *, dollar: bool) -> str:
        if not (isinstance(node, exp.Literal) and node.is_string):
            raise Untranslatable(f"{what} with a pattern other than a string literal ({node.sql('spark')})")
        return string_literal(re2_pattern(node.this, dollar=dollar))

    def visit_RegexpLike(self, node: exp.RegexpLike) -> tuple[str, SqlType]:
        """``s RLIKE p``: whether ``p`` matches anywhere in ``s`` (Java's ``find``)."""
        if node.args.get("flag") is not None:
            raise Untranslatable(f"RLIKE with flags ({node.sql('spark')})")
        x, _ = self._operand(node.this, "string", "RLIKE")
        return f"regexp_matches({x}, {self._pattern(node.expression, 'RLIKE', dollar=True)})", BOOL

    def _regexp(self, args: list[exp.Expression]) -> tuple[str, SqlType]:
        if len(args) != 2:
            raise Untranslatable("REGEXP with other than two arguments")
        return self.visit_RegexpLike(exp.RegexpLike(this=args[0], expression=args[1]))

    def visit_RegexpExtract(self, node: exp.RegexpExtract) -> tuple[str, SqlType]:
        """``regexp_extract(s, p[, n])``: group ``n`` (1 by default) of the first match, ''
        when nothing matches or the group took no part, in both. A group ``p`` lacks fails
        in both (Spark's error)."""
        group = node.args.get("group")
        if group is None or not (isinstance(group, exp.Literal) and not group.is_string and group.this.isdigit()):
            raise Untranslatable(f"REGEXP_EXTRACT with a group other than a literal ({node.sql('spark')})")
        if node.args.get("parameters") is not None:
            raise Untranslatable(f"REGEXP_EXTRACT with parameters ({node.sql('spark')})")
        x, _ = self._operand(node.this, "string", "REGEXP_EXTRACT")
        pattern = self._pattern(node.expression, "REGEXP_EXTRACT", dollar=int(group.this) > 0)
        return f"regexp_extract({x}, {pattern}, {int(group.this)})", _STRING

    def visit_RegexpReplace(self, node: exp.RegexpReplace) -> tuple[str, SqlType]:
        """``regexp_replace(s, p, r)``: every match replaced by the literal ``r``, left to
        right (the ``'g'`` option; DuckDB replaces the first match by default)."""
        position = node.args.get("position")
        if position is not None and not (isinstance(position, exp.Literal) and position.this == "1"):
            raise Untranslatable(f"REGEXP_REPLACE from a position other than 1 ({node.sql('spark')})")
        if any(node.args.get(a) is not None for a in ("occurrence", "modifiers")):
            raise Untranslatable(f"REGEXP_REPLACE with options ({node.sql('spark')})")
        replacement = node.args.get("replacement")
        if not (isinstance(replacement, exp.Literal) and replacement.is_string and not set(replacement.this) & {"$", "\\"}):
            raise Untranslatable(f"REGEXP_REPLACE with a replacement other than a literal without $ or \\ ({node.sql('spark')})")
        x, _ = self._operand(node.this, "string", "REGEXP_REPLACE")
        pattern = self._pattern(node.expression, "REGEXP_REPLACE", dollar=False)
        # Right after a match, Java also replaces an empty match, RE2 does not ('x*' over
        # 'ax' gives '-a--' in Spark, '-a-' in DuckDB). Without lookaround, a pattern that
        # can match empty anywhere matches the empty string.
        if _matches_empty(pattern):
            raise Untranslatable(f"REGEXP_REPLACE with a pattern that matches the empty string ({node.sql('spark')})")
        return f"regexp_replace({x}, {pattern}, {string_literal(replacement.this)}, 'g')", _STRING
