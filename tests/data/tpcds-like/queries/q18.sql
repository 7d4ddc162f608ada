-- Promotion cost against sales, joined by the sale's promotion.
SELECT p_promo_id, sum(ss_net_paid) AS paid, max(p_cost) AS cost
FROM store_sales
JOIN promotion ON ss_promo_sk = p_promo_sk
GROUP BY p_promo_id
