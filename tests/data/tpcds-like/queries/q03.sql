-- q01's shape over web_sales.
SELECT i_item_id,
       avg(ws_quantity) AS avg_qty,
       avg(ws_sales_price) AS avg_price
FROM web_sales
JOIN item ON ws_item_sk = i_item_sk
JOIN date_dim ON ws_sold_date_sk = d_date_sk
WHERE d_year = 2000 AND i_category = 'Books'
GROUP BY i_item_id
ORDER BY i_item_id
LIMIT 100
