-- TPC-H Q17 (small-quantity-order revenue) as an incrementally maintained view (Spark SQL).
-- The query has no ORDER BY or LIMIT; it is the spec text unchanged (one-row global aggregate).
-- The correlated scalar subquery (AVG per part): a grouped aggregate joined on the part key.
SELECT SUM(l_extendedprice) / 7.0 AS avg_yearly
FROM lineitem, part
WHERE p_partkey = l_partkey
  AND p_brand = 'Brand#23'
  AND p_container = 'MED BOX'
  AND l_quantity < (
      SELECT 0.2 * AVG(l_quantity)
      FROM lineitem
      WHERE l_partkey = p_partkey
  )
