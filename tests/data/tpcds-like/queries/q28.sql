-- Monthly store revenue over a date range.
SELECT d_year, d_moy, sum(ss_sales_price) AS revenue
FROM store_sales
JOIN date_dim ON ss_sold_date_sk = d_date_sk
WHERE d_date BETWEEN DATE '2000-01-01' AND DATE '2000-12-31'
GROUP BY d_year, d_moy
ORDER BY d_year, d_moy
