-- Store sales with their returns, if any: a left outer join on ticket and item.
SELECT ss_store_sk,
       sum(ss_net_paid) AS paid,
       sum(coalesce(sr_return_amt, 0)) AS returned
FROM store_sales
LEFT JOIN store_returns
  ON ss_ticket_number = sr_ticket_number AND ss_item_sk = sr_item_sk
GROUP BY ss_store_sk
