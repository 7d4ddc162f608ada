-- q14 with an inner join: only the join type differs.
SELECT ss_store_sk,
       sum(ss_net_paid) AS paid,
       sum(coalesce(sr_return_amt, 0)) AS returned
FROM store_sales
JOIN store_returns
  ON ss_ticket_number = sr_ticket_number AND ss_item_sk = sr_item_sk
GROUP BY ss_store_sk
