-- q12 with its derived table written as a CTE of another name.
WITH item_revenue AS (
  SELECT i_category, i_item_id, sum(ss_sales_price) AS revenue
  FROM store_sales
  JOIN item ON ss_item_sk = i_item_sk
  GROUP BY i_category, i_item_id
)
SELECT i_category, i_item_id, revenue,
       rank() OVER (PARTITION BY i_category ORDER BY revenue DESC) AS rnk
FROM item_revenue
