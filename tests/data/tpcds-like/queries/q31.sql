-- Customers who bought both in stores and by catalog: INTERSECT.
SELECT ss_customer_sk AS customer_sk FROM store_sales
INTERSECT
SELECT cs_bill_customer_sk AS customer_sk FROM catalog_sales
