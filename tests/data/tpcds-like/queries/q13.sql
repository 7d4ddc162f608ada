-- Quantity sold per item over the three channels: UNION ALL, then an aggregate.
SELECT item_sk, sum(qty) AS total_qty
FROM (
  SELECT ss_item_sk AS item_sk, ss_quantity AS qty FROM store_sales
  UNION ALL
  SELECT cs_item_sk AS item_sk, cs_quantity AS qty FROM catalog_sales
  UNION ALL
  SELECT ws_item_sk AS item_sk, ws_quantity AS qty FROM web_sales
) all_sales
GROUP BY item_sk
