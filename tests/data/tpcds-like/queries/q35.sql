-- Web revenue by every combination of quarter and state: CUBE.
SELECT d_qoy, ca_state, sum(ws_net_paid) AS revenue
FROM web_sales
JOIN date_dim ON ws_sold_date_sk = d_date_sk
JOIN customer_address ON ws_bill_addr_sk = ca_address_sk
GROUP BY CUBE (d_qoy, ca_state)
