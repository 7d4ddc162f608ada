-- Frequent store customers: HAVING on a count.
SELECT c_customer_id, c_last_name, count(*) AS visits
FROM store_sales
JOIN customer ON ss_customer_sk = c_customer_sk
GROUP BY c_customer_id, c_last_name
HAVING count(*) > 5
ORDER BY visits DESC
LIMIT 100
