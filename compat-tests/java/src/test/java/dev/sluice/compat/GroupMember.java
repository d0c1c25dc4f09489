package dev.sluice.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * A member of a consumer group (classic or consumer protocol) that processes records into a {@link Ledger} and commits
 * after each poll. {@link #inProcess} runs it on a thread of this JVM; {@link #child} runs
 * {@link GroupMemberMain} in another JVM so that {@link #crash} is a real SIGKILL.
 */
abstract class GroupMember implements AutoCloseable {
    static final int SESSION_TIMEOUT_MS = 10_000;

    final String name;
    final Ledger ledger;
    /** The partitions this member owns now, as its rebalance listener was told. */
    final Set<Integer> owned = ConcurrentHashMap.newKeySet();
    volatile Throwable error;

    GroupMember(String name, Ledger ledger) {
        this.name = name;
        this.ledger = ledger;
    }

    /** Prefix of an assignor name that selects the KIP-848 consumer protocol with that server-side assignor. */
    static final String CONSUMER_PROTOCOL = "consumer:";

    /**
     * A classic member with the given assignor class, or, for {@code consumer:uniform} and
     * {@code consumer:range}, a member of the consumer protocol ({@code group.protocol=consumer})
     * with that server-side assignor; its session timeout and heartbeat interval come from the
     * broker ({@code group.consumer.*}).
     */
    static Map<String, Object> config(String group, String assignor) {
        Map<String, Object> c = new HashMap<>();
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (assignor.startsWith(CONSUMER_PROTOCOL)) {
            c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            c.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor.substring(CONSUMER_PROTOCOL.length()));
        } else {
            c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
            c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, SESSION_TIMEOUT_MS);
            c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1000);
        }
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return c;
    }

    void assigned(Collection<Integer> ps) {
        ledger.ownership.add(name + "+" + ps + "@" + System.nanoTime() / 1_000_000);
        owned.addAll(ps);
    }

    void revoked(Collection<Integer> ps) {
        ledger.ownership.add(name + "-" + ps + "@" + System.nanoTime() / 1_000_000);
        owned.removeAll(ps);
    }

    /** The consumer's positions, which a commitSync() without arguments commits. */
    static Map<Integer, Long> positions(KafkaConsumer<byte[], byte[]> c) {
        Map<Integer, Long> m = new java.util.TreeMap<>();
        for (TopicPartition tp : c.assignment()) {
            m.put(tp.partition(), c.position(tp, Duration.ofSeconds(15)));
        }
        return m;
    }

    @Override
    public String toString() {
        return name + owned;
    }

    /** Stops cleanly: the consumer closes and leaves the group. */
    @Override
    public abstract void close() throws Exception;

    static GroupMember inProcess(String name, Ledger ledger, String bootstrap, String topic, String group, String assignor) {
        return new Local(name, ledger, bootstrap, topic, group, assignor);
    }

    static Child child(String name, Ledger ledger, String bootstrap, String topic, String group, String assignor) throws Exception {
        return new Child(name, ledger, bootstrap, topic, group, assignor);
    }

    // ---------------------------------------------------------------------------------------------

    static final class Local extends GroupMember implements ConsumerRebalanceListener {
        private final Thread thread;
        private volatile boolean stop;

        Local(String name, Ledger ledger, String bootstrap, String topic, String group, String assignor) {
            super(name, ledger);
            thread = new Thread(() -> loop(bootstrap, topic, config(group, assignor)), "member-" + name);
            thread.start();
        }

        private void loop(String bootstrap, String topic, Map<String, Object> config) {
            try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, config)) {
                c.subscribe(List.of(topic), this);
                while (!stop) {
                    ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        ledger.processed(name, r.partition(), r.offset(), new String(r.value(), StandardCharsets.UTF_8));
                    }
                    if (!records.isEmpty()) {
                        try {
                            Map<Integer, Long> positions = positions(c);
                            c.commitSync(Duration.ofSeconds(15));
                            ledger.committed(name, positions);
                        } catch (org.apache.kafka.common.errors.RebalanceInProgressException
                                 | org.apache.kafka.clients.consumer.CommitFailedException e) {
                            Log.info("%s: commit failed during a rebalance (records will be redelivered): %s", name, e);
                        }
                    }
                }
                c.close(Duration.ofSeconds(15));
            } catch (Throwable t) {
                error = t;
                Log.info("%s: consumer failed: %s", name, t);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revoked(partitions.stream().map(TopicPartition::partition).toList());
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assigned(partitions.stream().map(TopicPartition::partition).toList());
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            revoked(partitions.stream().map(TopicPartition::partition).toList());
        }

        @Override
        public void close() throws Exception {
            stop = true;
            thread.join(30_000);
            if (thread.isAlive()) {
                throw new AssertionError(name + " did not close within 30 s");
            }
            owned.clear();
        }
    }

    static final class Child extends GroupMember {
        private final Process proc;
        private final Thread reader;
        private volatile boolean crashed;

        Child(String name, Ledger ledger, String bootstrap, String topic, String group, String assignor) throws Exception {
            super(name, ledger);
            proc = JavaProcess.builder(GroupMemberMain.class.getName(), List.of(bootstrap, topic, group, assignor))
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            reader = new Thread(this::read, "reader-" + name);
            reader.setDaemon(true);
            reader.start();
        }

        private void read() {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    String[] f = line.split(" ", 4);
                    switch (f[0]) {
                        case "ASSIGNED" -> assigned(parts(f));
                        case "REVOKED", "LOST" -> revoked(parts(f));
                        case "RECORD" -> ledger.processed(name, Integer.parseInt(f[1]), Long.parseLong(f[2]), f[3]);
                        case "COMMITTED" -> ledger.commits.add(name + " " + (f.length > 1 ? f[1] : "") + " @" + System.nanoTime() / 1_000_000);
                        default -> Log.info("%s says: %s", name, line);
                    }
                }
            } catch (Exception e) {
                error = e;
            }
            if (!crashed) {
                error = new AssertionError(name + " (child JVM) exited by itself; its stderr is in the test output");
            }
        }

        private static List<Integer> parts(String[] f) {
            return f.length < 2 || f[1].isEmpty() ? List.of() : Arrays.stream(f[1].split(",")).map(Integer::valueOf).toList();
        }

        /** SIGKILL: the member stops heartbeating without leaving; the broker must time its session out. */
        void crash() throws Exception {
            crashed = true;
            proc.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            reader.join(5000);
        }

        @Override
        public void close() throws Exception {
            crashed = true;
            if (proc.isAlive()) {
                proc.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }
    }
}
