"""The bounded map a long-lived process keeps its reads in (:mod:`ivm_assets.recent`)."""

from ivm_assets.recent import Recent


def test_the_least_recently_used_entry_goes_first():
    kept = Recent(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # now b is the least recently used
    kept.put("c", 3)
    assert kept.keys() == ["a", "c"] and kept.get("b") is None


def test_a_size_bound_counts_what_entries_held_when_kept():
    limit = [10]
    kept = Recent(lambda: limit[0], size=len)
    assert kept.put("a", "xxxx") and kept.put("b", "xxxx")
    assert not kept.put("big", "x" * 11)  # alone past the limit: not kept, nothing dropped
    assert kept.keys() == ["a", "b"] and kept.total() == 8
    kept.put("c", "xxxx")
    assert kept.keys() == ["b", "c"] and kept.total() == 8
    limit[0] = 5  # a bound read from a setting applies at the next insertion
    kept.put("d", "x")
    assert kept.keys() == ["c", "d"] and kept.total() == 5


def test_what_is_held_may_refuse_a_replacement():
    kept = Recent(4)
    kept.put("t", 7)
    assert not kept.put("t", 5, over=lambda held: held <= 5)  # an older version does not replace a newer
    assert kept.put("t", 9, over=lambda held: held <= 9) and kept.get("t") == 9


def test_take_removes_only_what_it_accepts_and_drop_selects_by_key():
    kept = Recent(10, size=lambda v: v)
    for key, value in [("s3://b/x", 1), ("s3://b/x/y", 2), ("s3://bb", 3)]:
        kept.put(key, value)
    assert kept.take("s3://bb", lambda v: v > 5) is None and "s3://bb" in kept
    assert kept.take("s3://bb") == 3 and "s3://bb" not in kept
    kept.drop(lambda key: key.startswith("s3://b/"))
    assert kept.keys() == [] and kept.total() == 0
