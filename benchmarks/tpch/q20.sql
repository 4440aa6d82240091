-- TPC-H Q20 (potential part promotion) as an incrementally maintained view (Spark SQL).
-- ORDER BY dropped: a view is an unordered bag of rows. Nested IN (subquery) semi joins; the
-- scalar subquery correlated on part and supplier: a grouped aggregate joined on both keys.
SELECT s_name, s_address
FROM supplier, nation
WHERE s_suppkey IN (
      SELECT ps_suppkey
      FROM partsupp
      WHERE ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
        AND ps_availqty > (
            SELECT 0.5 * SUM(l_quantity)
            FROM lineitem
            WHERE l_partkey = ps_partkey
              AND l_suppkey = ps_suppkey
              AND l_shipdate >= DATE '1994-01-01'
              AND l_shipdate < DATE '1994-01-01' + INTERVAL 1 YEAR
        )
  )
  AND s_nationkey = n_nationkey
  AND n_name = 'CANADA'
