-- Customers whose catalog spending beats their store spending: two aggregates in CTEs joined.
WITH store_total AS (
  SELECT ss_customer_sk AS customer_sk, sum(ss_net_paid) AS total
  FROM store_sales GROUP BY ss_customer_sk
),
catalog_total AS (
  SELECT cs_bill_customer_sk AS customer_sk, sum(cs_net_paid) AS total
  FROM catalog_sales GROUP BY cs_bill_customer_sk
)
SELECT c_customer_id, st.total AS store_total, ct.total AS catalog_total
FROM store_total st
JOIN catalog_total ct ON st.customer_sk = ct.customer_sk
JOIN customer ON st.customer_sk = c_customer_sk
WHERE ct.total > st.total
ORDER BY c_customer_id
LIMIT 100
