-- Star join of store sales with item and date: average quantity and price per item.
SELECT i_item_id,
       avg(ss_quantity) AS avg_qty,
       avg(ss_sales_price) AS avg_price
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
JOIN date_dim ON ss_sold_date_sk = d_date_sk
WHERE d_year = 2000 AND i_category = 'Books'
GROUP BY i_item_id
ORDER BY i_item_id
LIMIT 100
