-- The distinct cities that have both a store and a customer: DISTINCT over a join.
SELECT DISTINCT s_city
FROM store
JOIN customer_address ON s_city = ca_city
