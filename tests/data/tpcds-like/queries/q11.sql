-- Customers who bought in stores and on the web: EXISTS subqueries.
SELECT c_customer_id, c_birth_country
FROM customer c
WHERE EXISTS (SELECT 1 FROM store_sales WHERE ss_customer_sk = c.c_customer_sk)
  AND EXISTS (SELECT 1 FROM web_sales WHERE ws_bill_customer_sk = c.c_customer_sk)
ORDER BY c_customer_id
LIMIT 100
