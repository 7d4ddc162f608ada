-- q20 with the aggregate in a CTE, other aliases.
WITH paid AS (
  SELECT c.c_customer_id AS cid, sum(s.ss_net_paid) AS amount
  FROM store_sales s JOIN customer c ON s.ss_customer_sk = c.c_customer_sk
  GROUP BY c.c_customer_id
)
SELECT cid, amount FROM paid ORDER BY amount DESC LIMIT 100
