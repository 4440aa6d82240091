-- TPC-H Q2 (minimum cost supplier) as an incrementally maintained view (Spark SQL).
-- ORDER BY and LIMIT 100 kept (the spec's top 100): an incremental top-k.
-- The correlated scalar subquery (MIN per part): a grouped aggregate joined on the part key.
-- FROM lists partsupp before supplier (the spec: part, supplier, partsupp): joins follow the
-- FROM order, and part then supplier, which share no condition, would be a cross join.
SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
FROM part, partsupp, supplier, nation, region
WHERE p_partkey = ps_partkey
  AND s_suppkey = ps_suppkey
  AND p_size = 15
  AND p_type LIKE '%BRASS'
  AND s_nationkey = n_nationkey
  AND n_regionkey = r_regionkey
  AND r_name = 'EUROPE'
  AND ps_supplycost = (
      SELECT MIN(ps_supplycost)
      FROM partsupp, supplier, nation, region
      WHERE p_partkey = ps_partkey
        AND s_suppkey = ps_suppkey
        AND s_nationkey = n_nationkey
        AND n_regionkey = r_regionkey
        AND r_name = 'EUROPE'
  )
ORDER BY s_acctbal DESC, n_name, s_name, p_partkey
LIMIT 100
