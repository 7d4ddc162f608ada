-- Customers living in some states: an IN subquery.
SELECT c_customer_id, c_first_name, c_last_name
FROM customer
WHERE c_current_addr_sk IN (
  SELECT ca_address_sk FROM customer_address WHERE ca_state IN ('CA', 'WA', 'OR')
)
ORDER BY c_customer_id
LIMIT 100
