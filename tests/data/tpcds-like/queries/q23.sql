-- q22 as a sort-merge join (hint): only the join strategy differs.
SELECT /*+ MERGE(item) */ i_category, sum(ss_sales_price) AS revenue
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
GROUP BY i_category
