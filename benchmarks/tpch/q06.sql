-- TPC-H Q6 (forecasting revenue change) as an incrementally maintained view (Spark SQL).
-- The query has no ORDER BY or LIMIT; it is the spec text unchanged (one-row global aggregate).
SELECT
    SUM(l_extendedprice * l_discount) AS revenue
FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01'
  AND l_shipdate < DATE '1994-01-01' + INTERVAL 1 YEAR
  AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01
  AND l_quantity < 24
