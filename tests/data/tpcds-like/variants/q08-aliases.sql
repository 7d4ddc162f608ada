-- q08 with a table alias and another name for the count.
SELECT cu.c_customer_id, cu.c_last_name, count(*) AS n
FROM store_sales AS s
JOIN customer AS cu ON s.ss_customer_sk = cu.c_customer_sk
GROUP BY cu.c_customer_id, cu.c_last_name
HAVING count(*) > 5
ORDER BY n DESC
LIMIT 100
