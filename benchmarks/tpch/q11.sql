-- TPC-H Q11 (important stock identification) as an incrementally maintained view (Spark SQL).
-- ORDER BY dropped: a view is an unordered bag of rows. The uncorrelated scalar subquery in
-- HAVING (a one-row aggregate) is joined to every group: when the threshold moves, every
-- group is compared again.
SELECT ps_partkey, SUM(ps_supplycost * ps_availqty) AS value
FROM partsupp, supplier, nation
WHERE ps_suppkey = s_suppkey
  AND s_nationkey = n_nationkey
  AND n_name = 'GERMANY'
GROUP BY ps_partkey
HAVING SUM(ps_supplycost * ps_availqty) > (
    SELECT SUM(ps_supplycost * ps_availqty) * 0.0001000000
    FROM partsupp, supplier, nation
    WHERE ps_suppkey = s_suppkey
      AND s_nationkey = n_nationkey
      AND n_name = 'GERMANY'
)
