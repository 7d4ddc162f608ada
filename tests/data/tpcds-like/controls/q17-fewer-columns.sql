-- q17 returning one column less (no i_brand).
SELECT i_item_id
FROM item
LEFT ANTI JOIN store_sales ON i_item_sk = ss_item_sk
