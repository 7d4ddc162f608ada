-- Items that were promoted by email: a LEFT SEMI join.
SELECT i_item_id, i_current_price
FROM item
LEFT SEMI JOIN promotion ON i_item_sk = p_item_sk AND p_channel_email = 'Y'
