package scalefold;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;
import org.apache.flink.util.ParameterTool;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;

import java.util.concurrent.locks.LockSupport;

/**
 * scalefold's workload job: the load an autoscaler decides for (`scalefold flink submit
 * --workload`, `scalefold load`).
 *
 * <p>"Source: Kafka" reads the records `scalefold load` produces (`key payload` lines) from a
 * topic of the local broker, in the consumer group `--group` (offsets committed on each
 * checkpoint, so the group's lag is the source's backlog too; the connector's own
 * `pendingRecords` metric says it per reader), "Parse" splits key from payload, and "Work",
 * keyed by the key, spends `--cost-us` microseconds on each record (one subtask's capacity
 * is about 1,000,000 / cost-us records a second) and counts the records of its key in
 * keyed state, then "Discard". `--cost-mode cpu` (the default) spends them in a busy loop
 * on the JVM's clock; `wait` parks the task's thread for them, as an operator that calls
 * a remote service waits: Flink counts the time as busy either way, but waiting subtasks
 * scale past the machine's cores (the autoscaling benchmark's job on two cores). Every vertex rescales
 * (the Kafka source hands a rescaled job's partitions round again); the adaptive
 * scheduler's upper bound is `--parallelism` (default `--max-parallelism`, 8).
 *
 * <p>Arguments: --bootstrap-servers HOST:PORT (127.0.0.1:9092), --topic (workload), --group
 * (scalefold-workload), --cost-us (200), --cost-mode cpu|wait (cpu), --max-parallelism (8),
 * --parallelism,
 * --checkpoint-interval MS (5000), --restart fixed-delay|none|cluster (fixed-delay: 1000
 * attempts, --restart-delay "1 s"), --name (scalefold-workload).
 */
public class WorkloadJob {
    public static void main(String[] args) throws Exception {
        ParameterTool params = ParameterTool.fromArgs(args);
        Configuration conf = new Configuration();
        String restart = params.get("restart", "fixed-delay");
        if (!restart.equals("cluster")) {
            conf.setString("restart-strategy.type", restart);
        }
        if (restart.equals("fixed-delay") || restart.equals("fixeddelay")) {
            conf.setString("restart-strategy.fixed-delay.attempts", "1000");
            conf.setString("restart-strategy.fixed-delay.delay", params.get("restart-delay", "1 s"));
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.enableCheckpointing(params.getLong("checkpoint-interval", 5000));
        int maxParallelism = params.getInt("max-parallelism", 8);
        env.setParallelism(params.getInt("parallelism", maxParallelism));
        env.setMaxParallelism(maxParallelism);
        long costNanos = params.getLong("cost-us", 200) * 1000;
        String costMode = params.get("cost-mode", "cpu");
        if (!costMode.equals("cpu") && !costMode.equals("wait")) {
            throw new IllegalArgumentException("--cost-mode is cpu or wait, not " + costMode);
        }

        KafkaSource<String> source =
                KafkaSource.<String>builder()
                        .setBootstrapServers(params.get("bootstrap-servers", "127.0.0.1:9092"))
                        .setTopics(params.get("topic", "workload"))
                        .setGroupId(params.get("group", "scalefold-workload"))
                        .setStartingOffsets(
                                OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
                        .setValueOnlyDeserializer(new SimpleStringSchema())
                        .setProperty("partition.discovery.interval.ms", "10000")
                        .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "Kafka")
                .map(WorkloadJob::keyOf)
                .returns(Types.STRING)
                .name("Parse")
                .keyBy(key -> key)
                .process(new Work(costNanos, costMode.equals("wait")))
                .name("Work")
                .sinkTo(new DiscardingSink<>())
                .name("Discard");
        env.execute(params.get("name", "scalefold-workload"));
    }

    /** A record's key: what comes before its first space (the whole line if none). */
    static String keyOf(String line) {
        int space = line.indexOf(' ');
        return space < 0 ? line : line.substring(0, space);
    }

    /** Spends the record's cost (CPU, or a wait), then counts the records of its key. */
    static final class Work extends KeyedProcessFunction<String, String, Long> {
        private final long costNanos;
        private final boolean waits;
        private transient ValueState<Long> count;

        Work(long costNanos, boolean waits) {
            this.costNanos = costNanos;
            this.waits = waits;
        }

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(String key, Context context, Collector<Long> out)
                throws Exception {
            long until = System.nanoTime() + costNanos;
            for (long left = costNanos; left > 0; left = until - System.nanoTime()) {
                if (waits) {
                    LockSupport.parkNanos(left);
                } else {
                    Thread.onSpinWait();
                }
            }
            Long seen = count.value();
            long next = seen == null ? 1 : seen + 1;
            count.update(next);
            out.collect(next);
        }
    }
}
