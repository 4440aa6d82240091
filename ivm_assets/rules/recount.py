"""When a DOUBLE sum is summed again from its values, and how (:mod:`ivm_assets.rules.aggregate_steps`).

A running DOUBLE sum keeps the rounding of every value it held: 1e30 + 0.1 is 1e30, and
once the 1e30 row leaves, old + change is 0.0 where Spark's sum over the remaining row is
0.1. Summing a group again from the values it holds fixes that, but reads all of them,
about a recompute of the group. So each group also keeps a bound on how far the changes
added since it was last counted may have taken its running sum (``c<i>``, the values
summed into it since; ``e<i>``, the bound), and is summed again only where a value leaves
and the bound reaches 2⁻³⁶ of the sum, or either is not finite.

The expressions read the columns of the aggregate's new group rows (:meth:`AggregateRule.combined`):
``c<i>``, the stored ``e<i>``, ``__m<i>`` (the change's magnitudes), ``__h`` (1 where the
group was held before) and ``__d<i>`` (1 where a value leaves).
"""

from __future__ import annotations

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Call, Case, Cast, Col, Lit, and_, gt
from ivm_assets.zset import WEIGHT

# Where the bound (in units of 2⁻⁵³) may reach, in units of the sum: 2¹⁷, so 2⁻³⁶ of it.
_ROOM = 2**17


def error_bound(i: int, running: rel.Expr) -> rel.Expr:
    """Sum ``i``'s new ``e<i>``: a bound, in units of 2⁻⁵³, on how far adding changes since
    it was last counted from its values (or built) has taken the running sum beyond the
    last count carried on by their exact value, the rounding of the values that left
    included (:func:`recount_wanted` says what that leaves out).

    An epoch sums its change (``m`` values of magnitudes summing to ``a``: off by at most
    m·a units) and adds it to the running sum (half a unit of the new sum, ``running``,
    counted whole). Values that leave also take with them the rounding they put into the
    sum when it was last counted: at most ``c``·(their magnitudes) units, ``c`` the values
    summed into it since, which is at least ``m``. So each epoch adds c·a + |running|
    units. A build, or a group's first values, is a sum of the values held: 0."""
    c, magnitudes = Cast(Col(f"c{i}"), "double"), Col(f"__m{i}")
    grown = rel.add(Col(f"e{i}"), rel.add(rel.mul(c, magnitudes), magnitude(running)))
    return Case(gt(Col("__h"), Lit(0)), Cast(grown, "double"), Cast(Lit(0), "double"))


def recount_wanted(i: int, running: rel.Expr, bound: rel.Expr) -> rel.Expr:
    """Whether sum ``i`` of a group (``running``, its new running sum; ``bound``, its new
    :func:`error_bound`) is summed again from its values: where a value left it, and the
    bound reaches 2⁻³⁶ of the sum, or either is not finite.

    Below that, the changes added since the last count (a sum of the values then held, as
    a recompute gives it) have moved the running sum by at most 1.5·10⁻¹¹ of it beyond
    their exact value, the rounding of the values that left included: a hundred times
    below the 9 significant digits in which the correctness oracle, like Spark's sums in
    two orders, finds sums equal. (The values still held carry the rounding of the last
    count, which a recompute of them has too, in its own order.) 1e30 + 0.1 −
    1e30 is recounted (a bound of about 2⁵³·1e30 units against a sum of 0); prices leaving
    a group of prices are not, until the bound has grown for many epochs. NaN and
    ±Infinity are recounted whenever a value leaves (where they go is their order's;
    comparisons order NaN above every value, so finiteness is asked first)."""
    zero = Lit(0)

    def finite(e: rel.Expr) -> rel.Expr:
        return and_(Call("not", (Call("is_nan", (e,)),)), Call("not", (Call("is_infinite", (e,)),)))

    room = Cast(rel.mul(Cast(Lit(_ROOM), "double"), magnitude(running)), "double")
    small = and_(and_(finite(running), finite(bound)), Call("<=", (bound, room)))
    return and_(gt(Col(f"__d{i}"), zero), Call("not", (rel.coalesce(small, Call("=", (zero, Lit(1)))),)))


def summed_again(values: rel.Rel, group_keys: tuple[str, ...], i: int) -> rel.Rel:
    """Sum ``i`` of each group in ``values`` (its value rows), summed again (``r<i>``): each
    value times its weight (one rounding where adding its copies would round at each), and
    the count the error bound starts from again (``rc<i>``)."""
    times = Cast(rel.mul(Cast(Col("v"), "double"), Cast(Col(WEIGHT), "double")), "double")
    rows = rel.Select(values, tuple((k, Col(k)) for k in group_keys) + (("v", times), ("w", Col(WEIGHT))), gt(Col(WEIGHT), Lit(0)))
    return rel.Reduce(rows, group_keys, ((f"r{i}", "sum", Col("v")), (f"rc{i}", "sum", Col("w"))))


def magnitude(e: rel.Expr) -> rel.Expr:
    """|e| (NaN for NaN: ``greatest`` orders it above every value)."""
    return Call("greatest", (e, Call("neg", (e,))))
