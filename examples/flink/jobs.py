"""Two PyFlink jobs as a project would write them: functions that build the job on the
environment they are given, so that ``main`` runs them and the tests fingerprint them.

``orders_job`` is a DataStream job: Kafka-like orders (a FLIP-27 number sequence stands in for
the source), parsed by Python functions that PyFlink fuses into one operator, a keyed running
total with state, a side output for bad orders, and Sink V2 file sinks. ``revenue_sql_job`` is
the same business logic in SQL: a window TVF aggregation and a join, as one statement set.
"""

from __future__ import annotations

from typing import Any

from pyflink.common import Encoder, Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, OutputTag, ProcessFunction
from pyflink.datastream.connectors.file_system import FileSink
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state import ValueStateDescriptor

ORDER = Types.TUPLE([Types.LONG(), Types.LONG(), Types.DOUBLE()])  # id, customer, amount
BAD_ORDERS = OutputTag("bad-orders", Types.LONG())


class Validate(ProcessFunction):
    def process_element(self, order_id: int, ctx: Any) -> Any:
        if order_id % 13 == 0:
            yield BAD_ORDERS, order_id
        else:
            yield order_id, order_id % 7, float(order_id % 50)


class RunningTotal(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.DOUBLE()))

    def process_element(self, order: Any, ctx: Any) -> Any:
        total = (self.total.value() or 0.0) + order[2]
        self.total.update(total)
        yield f"customer {order[1]}: {total:.2f}"


def orders_job(env: Any, out: str = "/tmp/orders-job", validate: bool = True) -> None:
    orders = env.from_source(
        NumberSequenceSource(1, 10_000), WatermarkStrategy.no_watermarks(), "Orders"
    ).uid("orders-source")
    parsed = (
        orders.process(Validate(), output_type=ORDER).name("Validate")
        if validate
        else (orders.map(lambda n: (n, n % 7, float(n % 50)), output_type=ORDER).name("Parse"))
    )
    totals = (
        parsed.key_by(lambda order: order[1], key_type=Types.LONG())
        .process(RunningTotal(), output_type=Types.STRING())
        .uid("running-total")
        .name("Running total per customer")
    )
    totals.sink_to(
        FileSink.for_row_format(f"{out}/totals", Encoder.simple_string_encoder()).build()
    ).uid("totals-sink").name("Totals")
    if validate:
        parsed.get_side_output(BAD_ORDERS).map(str, output_type=Types.STRING()).sink_to(
            FileSink.for_row_format(f"{out}/bad", Encoder.simple_string_encoder()).build()
        ).uid("bad-orders-sink").name("Bad orders")


DDL = [
    """CREATE TEMPORARY TABLE orders (
        order_id BIGINT, customer_id BIGINT, amount DOUBLE, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
    ) WITH ('connector' = 'datagen', 'rows-per-second' = '10')""",
    """CREATE TEMPORARY TABLE customers (customer_id BIGINT, country STRING)
        WITH ('connector' = 'datagen', 'number-of-rows' = '100')""",
    """CREATE TEMPORARY TABLE revenue_per_minute (
        window_start TIMESTAMP(3), customer_id BIGINT, revenue DOUBLE
    ) WITH ('connector' = 'blackhole')""",
    """CREATE TEMPORARY TABLE revenue_per_country (country STRING, revenue DOUBLE)
        WITH ('connector' = 'blackhole')""",
]


def revenue_sql_job(t_env: Any) -> Any:
    """The statement set ``statement_set.execute()`` would submit."""
    for ddl in DDL:
        t_env.execute_sql(ddl)
    statements = t_env.create_statement_set()
    statements.add_insert_sql(
        "INSERT INTO revenue_per_minute SELECT window_start, customer_id, SUM(amount) "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
        "GROUP BY window_start, window_end, customer_id"
    )
    statements.add_insert_sql(
        "INSERT INTO revenue_per_country SELECT c.country, SUM(o.amount) FROM orders o "
        "JOIN customers c ON o.customer_id = c.customer_id GROUP BY c.country"
    )
    return statements
