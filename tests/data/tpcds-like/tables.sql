-- Ten tables in the TPC-DS style: the fact tables of three sales channels and of store
-- returns, and the dimensions they join to. A handful of columns each, TPC-DS column names.
-- The tests create them empty (no data is ever read: only the plans are fingerprinted).

CREATE TABLE store_sales (
  ss_sold_date_sk INT,
  ss_item_sk INT,
  ss_customer_sk INT,
  ss_addr_sk INT,
  ss_store_sk INT,
  ss_promo_sk INT,
  ss_ticket_number BIGINT,
  ss_quantity INT,
  ss_sales_price DECIMAL(7,2),
  ss_ext_discount_amt DECIMAL(7,2),
  ss_net_paid DECIMAL(7,2),
  ss_net_profit DECIMAL(7,2)
) USING parquet;

CREATE TABLE catalog_sales (
  cs_sold_date_sk INT,
  cs_item_sk INT,
  cs_bill_customer_sk INT,
  cs_bill_addr_sk INT,
  cs_promo_sk INT,
  cs_order_number BIGINT,
  cs_quantity INT,
  cs_sales_price DECIMAL(7,2),
  cs_ext_discount_amt DECIMAL(7,2),
  cs_net_paid DECIMAL(7,2),
  cs_net_profit DECIMAL(7,2)
) USING parquet;

CREATE TABLE web_sales (
  ws_sold_date_sk INT,
  ws_item_sk INT,
  ws_bill_customer_sk INT,
  ws_bill_addr_sk INT,
  ws_promo_sk INT,
  ws_order_number BIGINT,
  ws_quantity INT,
  ws_sales_price DECIMAL(7,2),
  ws_ext_discount_amt DECIMAL(7,2),
  ws_net_paid DECIMAL(7,2),
  ws_net_profit DECIMAL(7,2)
) USING parquet;

CREATE TABLE store_returns (
  sr_returned_date_sk INT,
  sr_item_sk INT,
  sr_customer_sk INT,
  sr_store_sk INT,
  sr_ticket_number BIGINT,
  sr_return_quantity INT,
  sr_return_amt DECIMAL(7,2),
  sr_net_loss DECIMAL(7,2)
) USING parquet;

CREATE TABLE item (
  i_item_sk INT,
  i_item_id STRING,
  i_item_desc STRING,
  i_brand STRING,
  i_class STRING,
  i_category STRING,
  i_manufact_id INT,
  i_current_price DECIMAL(7,2)
) USING parquet;

CREATE TABLE store (
  s_store_sk INT,
  s_store_id STRING,
  s_store_name STRING,
  s_state STRING,
  s_county STRING,
  s_city STRING
) USING parquet;

CREATE TABLE date_dim (
  d_date_sk INT,
  d_date DATE,
  d_year INT,
  d_moy INT,
  d_qoy INT,
  d_dow INT
) USING parquet;

CREATE TABLE customer (
  c_customer_sk INT,
  c_customer_id STRING,
  c_current_addr_sk INT,
  c_first_name STRING,
  c_last_name STRING,
  c_birth_country STRING,
  c_preferred_cust_flag STRING
) USING parquet;

CREATE TABLE customer_address (
  ca_address_sk INT,
  ca_state STRING,
  ca_county STRING,
  ca_city STRING,
  ca_zip STRING,
  ca_gmt_offset DECIMAL(5,2)
) USING parquet;

CREATE TABLE promotion (
  p_promo_sk INT,
  p_promo_id STRING,
  p_item_sk INT,
  p_channel_email STRING,
  p_channel_tv STRING,
  p_cost DECIMAL(15,2)
) USING parquet;
