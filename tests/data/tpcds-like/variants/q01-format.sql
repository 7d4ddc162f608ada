/* q01 reformatted: keyword case, whitespace, line breaks, comments. */
select i_item_id, avg(ss_quantity) as avg_qty, avg(ss_sales_price) as avg_price from store_sales join item on ss_item_sk = i_item_sk   join date_dim
    on ss_sold_date_sk=d_date_sk   -- the date dimension
where d_year=2000
  and i_category='Books'
group   by i_item_id order by i_item_id limit 100
