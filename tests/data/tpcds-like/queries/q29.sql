-- Items sold in a store, returned, then bought again by catalog: three fact tables.
SELECT i_item_id, s_store_id,
       sum(ss_quantity) AS store_qty,
       sum(sr_return_quantity) AS returned_qty,
       sum(cs_quantity) AS catalog_qty
FROM store_sales
JOIN store_returns
  ON ss_customer_sk = sr_customer_sk AND ss_item_sk = sr_item_sk
  AND ss_ticket_number = sr_ticket_number
JOIN catalog_sales ON sr_customer_sk = cs_bill_customer_sk AND sr_item_sk = cs_item_sk
JOIN item ON ss_item_sk = i_item_sk
JOIN store ON ss_store_sk = s_store_sk
GROUP BY i_item_id, s_store_id
ORDER BY i_item_id, s_store_id
LIMIT 100
