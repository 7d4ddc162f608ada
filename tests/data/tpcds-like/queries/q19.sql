-- q18 joined by the promoted item instead: only the join key differs.
SELECT p_promo_id, sum(ss_net_paid) AS paid, max(p_cost) AS cost
FROM store_sales
JOIN promotion ON ss_item_sk = p_item_sk
GROUP BY p_promo_id
