package scalefold;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.ParameterTool;

/**
 * scalefold's sample streaming job for the local Flink (`scalefold flink submit`).
 *
 * <p>Three vertices in two slot-sharing groups: "Numbers" (the source) and "Bucket" in
 * `default`, "Sum" (a keyed reduce chained with the sink) in `sums`. Arguments:
 * --max-parallelism N (8), --parallelism N (the max parallelism: the adaptive scheduler's
 * upper bound for Bucket and Sum), --restart fixed-delay|none|cluster|... (fixed-delay: 1000
 * attempts; cluster: none set, the cluster's applies),
 * --restart-delay DURATION (fixed-delay's delay, "1 s"), --checkpoint-interval MS (2000),
 * --rate RECORDS_PER_SECOND (20), --name NAME.
 *
 * <p>The source is rate-limited (no busy loop on a 2-core machine) and kept at parallelism 1:
 * a generator source splits its number range once, by the parallelism it first runs with,
 * and keeps those splits in its checkpoints, so subtasks added by a rescale get no split
 * and go FINISHED (seen with fromSequence). The other vertices rescale freely.
 */
public class SampleJob {
    public static void main(String[] args) throws Exception {
        ParameterTool params = ParameterTool.fromArgs(args);
        Configuration conf = new Configuration();
        String restart = params.get("restart", "fixed-delay");
        if (!restart.equals("cluster")) { // "cluster": the cluster's strategy applies
            conf.setString("restart-strategy.type", restart);
        }
        if (restart.equals("fixed-delay") || restart.equals("fixeddelay")) {
            conf.setString("restart-strategy.fixed-delay.attempts", "1000");
            conf.setString("restart-strategy.fixed-delay.delay", params.get("restart-delay", "1 s"));
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.enableCheckpointing(params.getLong("checkpoint-interval", 2000));
        int maxParallelism = params.getInt("max-parallelism", 8);
        env.setParallelism(params.getInt("parallelism", maxParallelism));
        double rate = params.getDouble("rate", 20.0);

        DataGeneratorSource<Long> numbers =
                new DataGeneratorSource<>(
                        index -> index, Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate), Types.LONG);
        env.fromSource(numbers, WatermarkStrategy.noWatermarks(), "Numbers")
                .setParallelism(1)
                .setMaxParallelism(1)
                .map(value -> value % 97)
                .returns(Types.LONG)
                .name("Bucket")
                .setMaxParallelism(maxParallelism)
                .keyBy(value -> value)
                .reduce(Long::sum)
                .name("Sum")
                .setMaxParallelism(maxParallelism)
                .slotSharingGroup("sums")
                .sinkTo(new DiscardingSink<>())
                .name("Discard")
                .setMaxParallelism(maxParallelism)
                .slotSharingGroup("sums");
        env.execute(params.get("name", "scalefold-sample"));
    }
}
