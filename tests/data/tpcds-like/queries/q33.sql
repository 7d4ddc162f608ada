-- Sales counted by price band: CASE expressions inside aggregates.
SELECT ca_state,
       sum(CASE WHEN ss_sales_price < 10 THEN 1 ELSE 0 END) AS cheap,
       sum(CASE WHEN ss_sales_price >= 10 AND ss_sales_price < 100 THEN 1 ELSE 0 END) AS mid,
       sum(CASE WHEN ss_sales_price >= 100 THEN 1 ELSE 0 END) AS dear
FROM store_sales
JOIN customer_address ON ss_addr_sk = ca_address_sk
GROUP BY ca_state
