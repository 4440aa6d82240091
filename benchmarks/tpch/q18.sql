-- TPC-H Q18 (large volume customer) as an incrementally maintained view (Spark SQL).
-- ORDER BY and LIMIT 100 dropped: the view keeps every group; order and top-N belong to the
-- reader. IN (subquery over an aggregate): a semi join.
SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, SUM(l_quantity) AS sum_qty
FROM customer, orders, lineitem
WHERE o_orderkey IN (
      SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING SUM(l_quantity) > 300
  )
  AND c_custkey = o_custkey
  AND o_orderkey = l_orderkey
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
