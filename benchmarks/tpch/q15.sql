-- TPC-H Q15 (top supplier) as an incrementally maintained view (Spark SQL).
-- The spec's view revenue0 inlined as a CTE (used twice: two copies of its operators).
-- ORDER BY dropped: a view is an unordered bag of rows. The uncorrelated scalar subquery
-- (MAX over revenue0) is joined to every row.
WITH revenue0 AS (
    SELECT l_suppkey AS supplier_no, SUM(l_extendedprice * (1 - l_discount)) AS total_revenue
    FROM lineitem
    WHERE l_shipdate >= DATE '1996-01-01'
      AND l_shipdate < DATE '1996-01-01' + INTERVAL 3 MONTHS
    GROUP BY l_suppkey
)
SELECT s_suppkey, s_name, s_address, s_phone, total_revenue
FROM supplier, revenue0
WHERE s_suppkey = supplier_no
  AND total_revenue = (SELECT MAX(total_revenue) FROM revenue0)
