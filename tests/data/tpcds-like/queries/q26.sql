-- Distinct customers per store: count(DISTINCT ...).
SELECT s_store_name, count(DISTINCT ss_customer_sk) AS customers
FROM store_sales
JOIN store ON ss_store_sk = s_store_sk
GROUP BY s_store_name
