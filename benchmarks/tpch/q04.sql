-- TPC-H Q4 (order priority checking) as an incrementally maintained view (Spark SQL).
-- ORDER BY dropped: a view is an unordered bag of rows. EXISTS: a semi join.
SELECT
    o_orderpriority,
    COUNT(*) AS order_count
FROM orders
WHERE o_orderdate >= DATE '1993-07-01'
  AND o_orderdate < DATE '1993-07-01' + INTERVAL 3 MONTHS
  AND EXISTS (
      SELECT * FROM lineitem
      WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate
  )
GROUP BY o_orderpriority
