-- q30 with the CTE and its columns renamed, table aliases changed.
WITH ret AS (
  SELECT sr_customer_sk AS cust, sr_store_sk AS st,
         sum(sr_return_amt) AS total
  FROM store_returns
  JOIN date_dim ON sr_returned_date_sk = d_date_sk
  WHERE d_year = 2000
  GROUP BY sr_customer_sk, sr_store_sk
)
SELECT c_customer_id
FROM ret a
JOIN store ON s_store_sk = a.st
JOIN customer ON a.cust = c_customer_sk
WHERE a.total > (SELECT avg(total) * 1.2 FROM ret b WHERE a.st = b.st)
  AND s_state = 'TN'
ORDER BY c_customer_id
LIMIT 100
