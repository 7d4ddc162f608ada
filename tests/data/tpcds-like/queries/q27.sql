-- Quantity per category and class with subtotals, rolled up over item attributes.
SELECT i_category, i_class, sum(ss_quantity) AS qty,
       grouping(i_class) AS class_total
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
GROUP BY ROLLUP (i_category, i_class)
