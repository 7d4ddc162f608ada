-- q10 in lower case on two lines, with a block comment inside.
select c_customer_id, c_first_name, c_last_name from customer where c_current_addr_sk in
(select /* the states */ ca_address_sk from customer_address where ca_state in ('CA','WA','OR')) order by c_customer_id limit 100
