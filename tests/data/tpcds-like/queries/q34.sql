-- Each customer's purchases numbered in time, with the previous amount: row_number and lag.
SELECT ss_customer_sk, ss_ticket_number, ss_net_paid,
       row_number() OVER (PARTITION BY ss_customer_sk ORDER BY ss_sold_date_sk) AS nth,
       lag(ss_net_paid) OVER (PARTITION BY ss_customer_sk ORDER BY ss_sold_date_sk) AS previous
FROM store_sales
