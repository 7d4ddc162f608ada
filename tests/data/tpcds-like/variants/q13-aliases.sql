-- q13 with other column aliases in the union and another name for the derived table.
select k, SUM(q) total
from (select ss_item_sk k, ss_quantity q from store_sales
      union all select cs_item_sk k, cs_quantity q from catalog_sales
      union all select ws_item_sk k, ws_quantity q from web_sales) u
group by k
