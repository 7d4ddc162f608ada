-- Customers who bought in stores but never by catalog: EXCEPT.
SELECT ss_customer_sk AS customer_sk FROM store_sales
EXCEPT
SELECT cs_bill_customer_sk AS customer_sk FROM catalog_sales
