"""PyFlink DataStream programs for the cross-check, one function per shape.

Each function builds a job on the environment it is given (and returns nothing): the test
fingerprints the environment and compares with Flink's JobGraph. Functions are plain Python
(lambdas and small classes); none of them runs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pyflink.common import Duration, Encoder, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import (
    BroadcastProcessFunction,
    CoMapFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    OutputTag,
    ProcessFunction,
    ProcessWindowFunction,
)
from pyflink.datastream.connectors.file_system import FileSink
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
from pyflink.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)

PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])
ROWS = [("a", 1), ("b", 2), ("a", 3)]

PROGRAMS: dict[str, Callable[[Any], None]] = {}


def program(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    PROGRAMS[fn.__name__] = fn
    return fn


def pairs(env: Any, name: str = "Pairs") -> Any:
    return env.from_collection(ROWS, type_info=PAIR)


def numbers(env: Any, name: str = "Numbers", end: int = 100) -> Any:
    return env.from_source(NumberSequenceSource(1, end), WatermarkStrategy.no_watermarks(), name)


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def timed(ds: Any) -> Any:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_seconds(5)
    ).with_timestamp_assigner(_Ts())
    return ds.assign_timestamps_and_watermarks(strategy)


class _Count(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        current = (self.count.value() or 0) + 1
        self.count.update(current)
        yield value[0], current


class _Split(ProcessFunction):
    LATE = OutputTag("late", PAIR)

    def process_element(self, value: Any, ctx: Any) -> Any:
        if value[1] < 0:
            yield self.LATE, value
        else:
            yield value


class _Both(CoMapFunction):
    def map1(self, value: Any) -> Any:
        return value

    def map2(self, value: Any) -> Any:
        return value


class _Join(KeyedCoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield value

    def process_element2(self, value: Any, ctx: Any) -> Any:
        yield value


class _Rules(BroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        pass


class _Window(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield key, sum(e[1] for e in elements)


# -- Python functions and PyFlink's chaining of them ------------------------------------------


@program
def python_chain(env: Any) -> None:
    ds = pairs(env).map(lambda x: x, output_type=PAIR).filter(lambda x: x[1] > 0)
    ds.flat_map(lambda x: [x, x], output_type=PAIR).map(lambda x: x[0]).print()


@program
def python_chain_without_pyflink_optimizer(env: Any) -> None:
    # The test's environment sets python.operator-chaining.enabled: false.
    python_chain(env)


@program
def key_by_reduce(env: Any) -> None:
    ds = pairs(env).key_by(lambda x: x[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
    ds.map(lambda x: x[1]).print()


@program
def keyed_state(env: Any) -> None:
    ds = pairs(env).map(lambda x: x, output_type=PAIR).key_by(lambda x: x[0])
    ds.process(_Count(), output_type=PAIR).uid("counter").name("Count per key").print()


@program
def event_time_windows(env: Any) -> None:
    ds = timed(pairs(env)).key_by(lambda x: x[0])
    ds.window(TumblingEventTimeWindows.of(Time.seconds(10))).reduce(
        lambda a, b: (a[0], a[1] + b[1]), output_type=PAIR
    ).uid("tumbling").print()
    ds.window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))).process(
        _Window(), output_type=PAIR
    ).name("sliding").print()


@program
def session_and_count_windows(env: Any) -> None:
    ds = timed(pairs(env)).key_by(lambda x: x[0])
    ds.window(EventTimeSessionWindows.with_gap(Time.minutes(1))).reduce(
        lambda a, b: a, output_type=PAIR
    ).print()
    ds.count_window(3).reduce(lambda a, b: a, output_type=PAIR).print()


@program
def processing_time_window_all(env: Any) -> None:
    ds = pairs(env).window_all(TumblingProcessingTimeWindows.of(Time.seconds(5)))
    ds.reduce(lambda a, b: a, output_type=PAIR).print()


@program
def union(env: Any) -> None:
    a = pairs(env).map(lambda x: x, output_type=PAIR)
    b = pairs(env).filter(lambda x: True)
    c = pairs(env)
    a.union(b, c).key_by(lambda x: x[0]).reduce(lambda x, y: x).print()


@program
def self_union(env: Any) -> None:
    a = pairs(env).map(lambda x: x, output_type=PAIR)
    a.union(a).map(lambda x: x).print()


@program
def connect(env: Any) -> None:
    a = pairs(env)
    b = pairs(env).map(lambda x: x, output_type=PAIR)
    a.connect(b).map(_Both(), output_type=PAIR).print()


@program
def keyed_connect(env: Any) -> None:
    a = pairs(env).key_by(lambda x: x[0])
    b = numbers(env).map(lambda n: ("a", n), output_type=PAIR).key_by(lambda x: x[0])
    a.connect(b).process(_Join(), output_type=PAIR).uid("join").map(lambda x: x).print()


@program
def broadcast_state(env: Any) -> None:
    rules = pairs(env).broadcast(MapStateDescriptor("rules", Types.STRING(), Types.LONG()))
    numbers(env).map(lambda n: ("a", n), output_type=PAIR).connect(rules).process(
        _Rules(), output_type=PAIR
    ).print()


@program
def side_outputs(env: Any) -> None:
    main = pairs(env).process(_Split(), output_type=PAIR)
    main.get_side_output(_Split.LATE).map(lambda x: x[0]).print()
    main.map(lambda x: x[1]).print()


# -- identities: uid and setUidHash -----------------------------------------------------------


@program
def uids_and_hashes(env: Any) -> None:
    ds = pairs(env).map(lambda x: x, output_type=PAIR).uid("parse")
    ds = ds.filter(lambda x: True).set_uid_hash("0123456789abcdef0123456789abcdef")
    keyed = ds.key_by(lambda x: x[0]).reduce(lambda a, b: a).uid("reduce")
    keyed.print().uid("sink").set_uid_hash("fedcba9876543210fedcba9876543210")


# -- parallelism, slot sharing, chaining switches ---------------------------------------------


@program
def parallelism_and_max_parallelism(env: Any) -> None:
    env.set_parallelism(3)
    env.set_max_parallelism(64)
    ds = numbers(env).map(lambda n: n).set_parallelism(2).set_max_parallelism(32)
    ds = ds.map(lambda n: n).set_parallelism(2)
    ds.key_by(lambda n: n % 4).reduce(lambda a, b: a + b).set_parallelism(4).print()


@program
def different_max_parallelism_not_chained(env: Any) -> None:
    # The option is set by the test's environment config.
    parallelism_and_max_parallelism(env)


@program
def slot_sharing_groups(env: Any) -> None:
    ds = numbers(env).map(lambda n: n).slot_sharing_group("cpu")
    ds = ds.map(lambda n: n + 1).slot_sharing_group("cpu").filter(lambda n: n > 0)
    ds.print().slot_sharing_group("io")


@program
def chaining_switches(env: Any) -> None:
    ds = numbers(env).map(lambda n: n).name("first")
    ds = ds.filter(lambda n: True).disable_chaining().map(lambda n: n).start_new_chain()
    ds.map(lambda n: n).print().disable_chaining()


@program
def chaining_disabled(env: Any) -> None:
    env.disable_operator_chaining()
    numbers(env).map(lambda n: n).key_by(lambda n: n).reduce(lambda a, b: a).print()


@program
def partitioners(env: Any) -> None:
    env.set_parallelism(2)
    ds = numbers(env)
    ds.rebalance().map(lambda n: n).rescale().map(lambda n: n).shuffle().print()
    ds.forward().map(lambda n: n).broadcast().map(lambda n: n).print()
    ds.partition_custom(lambda key, count: key % count, lambda n: n).print()


@program
def force_non_parallel(env: Any) -> None:
    env.set_parallelism(4)
    numbers(env).map(lambda n: n).force_non_parallel().map(lambda n: n).print()


# -- sources and sinks ------------------------------------------------------------------------


@program
def flip27_source_and_file_sink(env: Any) -> None:
    sink = FileSink.for_row_format(
        "/tmp/pytest-opid-never-written", Encoder.simple_string_encoder()
    ).build()
    numbers(env, "Sequence").uid("numbers").map(
        lambda n: str(n), output_type=Types.STRING()
    ).sink_to(sink).uid("files")


@program
def legacy_and_new_sources(env: Any) -> None:
    legacy = pairs(env).map(lambda x: x[1], output_type=Types.LONG())
    new = numbers(env)
    legacy.union(new).map(lambda n: n).print()


@program
def many_sinks(env: Any) -> None:
    ds = numbers(env).map(lambda n: n)
    for i in range(3):
        ds.map(lambda n, i=i: n + i).name(f"branch {i}").print(f"out{i}")


def random_program(seed: int) -> Callable[[Any], None]:
    """A seeded random job: chains of Python operators, key_by + reduce, unions, parallelism
    and slot sharing changes, uids, disabled chains, new and legacy sources."""

    def build(env: Any) -> None:
        rng = random.Random(seed)
        env.set_parallelism(rng.choice([1, 2, 4]))
        streams = []
        for i in range(rng.randint(1, 3)):
            if rng.random() < 0.5:
                streams.append(numbers(env, f"src{i}").map(lambda n: ("k", n), output_type=PAIR))
            else:
                streams.append(pairs(env, f"src{i}"))
        for step in range(rng.randint(4, 12)):
            i = rng.randrange(len(streams))
            ds = streams[i]
            roll = rng.random()
            if roll < 0.35:
                ds = ds.map(lambda x: x, output_type=PAIR)
            elif roll < 0.45:
                ds = ds.filter(lambda x: True)
            elif roll < 0.55:
                ds = ds.flat_map(lambda x: [x], output_type=PAIR)
            elif roll < 0.7:
                ds = ds.key_by(lambda x: x[0]).reduce(lambda a, b: a)
            elif roll < 0.8 and len(streams) > 1:
                j = (i + 1) % len(streams)
                ds = ds.union(streams[j])
            elif roll < 0.87:
                ds = ds.rebalance().map(lambda x: x, output_type=PAIR)
            else:
                ds = ds.map(lambda x: x, output_type=PAIR).set_parallelism(rng.choice([1, 3]))
            if rng.random() < 0.2:
                ds = ds.uid(f"op-{seed}-{step}")
            if rng.random() < 0.1:
                ds = ds.slot_sharing_group("other")
            if rng.random() < 0.1:
                ds = ds.disable_chaining()
            streams[i] = ds
        for ds in streams:
            ds.print()

    build.__name__ = f"random_{seed}"
    return build
