-- Store and catalog quantities per item side by side: a FULL OUTER join of two aggregates.
SELECT coalesce(s.item_sk, c.item_sk) AS item_sk, s.qty AS store_qty, c.qty AS catalog_qty
FROM (SELECT ss_item_sk AS item_sk, sum(ss_quantity) AS qty FROM store_sales GROUP BY ss_item_sk) s
FULL OUTER JOIN
     (SELECT cs_item_sk AS item_sk, sum(cs_quantity) AS qty FROM catalog_sales GROUP BY cs_item_sk) c
  ON s.item_sk = c.item_sk
