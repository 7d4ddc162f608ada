-- Revenue per category with the item table broadcast (hint).
SELECT /*+ BROADCAST(item) */ i_category, sum(ss_sales_price) AS revenue
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
GROUP BY i_category
