-- q01's shape over catalog_sales: must differ from q01 by the table names.
SELECT i_item_id,
       avg(cs_quantity) AS avg_qty,
       avg(cs_sales_price) AS avg_price
FROM catalog_sales
JOIN item ON cs_item_sk = i_item_sk
JOIN date_dim ON cs_sold_date_sk = d_date_sk
WHERE d_year = 2000 AND i_category = 'Books'
GROUP BY i_item_id
ORDER BY i_item_id
LIMIT 100
