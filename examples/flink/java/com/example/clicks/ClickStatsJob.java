package com.example.clicks;

import java.time.Duration;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.windowing.assigners.TumblingProcessingTimeWindows;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * A small Flink job for pytest-opid's jar path: clicks (a FLIP-27 number sequence) are parsed,
 * counted per page in one-minute windows and written to a Sink V2 sink; invalid clicks go to a
 * side output. The stateful operators carry uids.
 *
 * <p>Arguments: {@code --parallelism N} sets the job's parallelism; {@code --fail} makes main
 * throw, {@code --no-pipeline} makes it return without building a job (both for the error tests).
 */
public class ClickStatsJob {

    static final OutputTag<Long> INVALID = new OutputTag<Long>("invalid") {};

    public static void main(String[] args) throws Exception {
        int parallelism = 2;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--parallelism")) {
                parallelism = Integer.parseInt(args[++i]);
            } else if (args[i].equals("--fail")) {
                throw new IllegalArgumentException("unknown region: moon");
            } else if (args[i].equals("--no-pipeline")) {
                return;
            }
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);

        DataStream<Long> clicks =
                env.fromSource(
                                new org.apache.flink.api.connector.source.lib.NumberSequenceSource(
                                        0, 1_000),
                                WatermarkStrategy.noWatermarks(),
                                "Clicks")
                        .uid("clicks");

        SingleOutputStreamOperator<Tuple2<Long, Long>> parsed =
                clicks.process(new Parse()).name("Parse clicks");

        parsed.keyBy(new ByPage())
                .window(TumblingProcessingTimeWindows.of(Duration.ofMinutes(1)))
                .reduce(new Sum())
                .uid("clicks-per-page")
                .name("Clicks per page")
                .map(new Format())
                .name("Format")
                .sinkTo(new DiscardingSink<>())
                .uid("stats-sink")
                .name("Stats");

        parsed.getSideOutput(INVALID)
                .map(new Describe())
                .name("Describe invalid")
                .disableChaining()
                .sinkTo(new DiscardingSink<>())
                .name("Invalid clicks");

        env.execute("click stats");
    }

    static final class Parse extends ProcessFunction<Long, Tuple2<Long, Long>> {
        @Override
        public void processElement(Long value, Context ctx, Collector<Tuple2<Long, Long>> out) {
            if (value % 97 == 0) {
                ctx.output(INVALID, value);
            } else {
                out.collect(Tuple2.of(value % 10, 1L));
            }
        }
    }

    static final class ByPage implements KeySelector<Tuple2<Long, Long>, Long> {
        @Override
        public Long getKey(Tuple2<Long, Long> click) {
            return click.f0;
        }
    }

    static final class Sum implements ReduceFunction<Tuple2<Long, Long>> {
        @Override
        public Tuple2<Long, Long> reduce(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(a.f0, a.f1 + b.f1);
        }
    }

    static final class Format implements MapFunction<Tuple2<Long, Long>, String> {
        @Override
        public String map(Tuple2<Long, Long> stats) {
            return "page " + stats.f0 + ": " + stats.f1;
        }
    }

    static final class Describe implements MapFunction<Long, String> {
        @Override
        public String map(Long click) {
            return "invalid click " + click;
        }
    }
}
