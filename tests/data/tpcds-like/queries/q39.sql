-- q07's aggregate over other grouping sets: (state, county), (county), (). Other subtotals than
-- q07's ROLLUP (which has (state) where this has (county)), in the same number of sets.
SELECT s_state, s_county, sum(ss_net_profit) AS profit
FROM store_sales
JOIN store ON ss_store_sk = s_store_sk
JOIN date_dim ON ss_sold_date_sk = d_date_sk
WHERE d_year = 2001
GROUP BY GROUPING SETS ((s_state, s_county), (s_county), ())
ORDER BY s_state, s_county
LIMIT 100
