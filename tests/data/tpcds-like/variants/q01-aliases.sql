-- q01 with other output aliases and table aliases.
SELECT it.i_item_id AS item,
       avg(sales.ss_quantity) AS mean_quantity,
       avg(sales.ss_sales_price) AS mean_price
FROM store_sales sales
JOIN item it ON sales.ss_item_sk = it.i_item_sk
JOIN date_dim dd ON sales.ss_sold_date_sk = dd.d_date_sk
WHERE dd.d_year = 2000 AND it.i_category = 'Books'
GROUP BY it.i_item_id
ORDER BY item
LIMIT 100
