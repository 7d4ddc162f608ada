-- Net profit per state and county with subtotals (ROLLUP).
SELECT s_state, s_county, sum(ss_net_profit) AS profit
FROM store_sales
JOIN store ON ss_store_sk = s_store_sk
JOIN date_dim ON ss_sold_date_sk = d_date_sk
WHERE d_year = 2001
GROUP BY ROLLUP (s_state, s_county)
ORDER BY s_state, s_county
LIMIT 100
