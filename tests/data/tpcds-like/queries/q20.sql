-- Best customers by money paid: ORDER BY an aggregate, LIMIT.
SELECT c_customer_id, sum(ss_net_paid) AS total_paid
FROM store_sales
JOIN customer ON ss_customer_sk = c_customer_sk
GROUP BY c_customer_id
ORDER BY total_paid DESC
LIMIT 100
