-- Items never sold in a store: a LEFT ANTI join.
SELECT i_item_id, i_brand
FROM item
LEFT ANTI JOIN store_sales ON i_item_sk = ss_item_sk
