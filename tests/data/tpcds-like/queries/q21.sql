-- q20 ordered by the customer id instead: only the ORDER BY key differs.
SELECT c_customer_id, sum(ss_net_paid) AS total_paid
FROM store_sales
JOIN customer ON ss_customer_sk = c_customer_sk
GROUP BY c_customer_id
ORDER BY c_customer_id DESC
LIMIT 100
