-- Rank of each item's revenue within its category: a window over an aggregate.
SELECT i_category, i_item_id, revenue,
       rank() OVER (PARTITION BY i_category ORDER BY revenue DESC) AS rnk
FROM (
  SELECT i_category, i_item_id, sum(ss_sales_price) AS revenue
  FROM store_sales
  JOIN item ON ss_item_sk = i_item_sk
  GROUP BY i_category, i_item_id
) per_item
