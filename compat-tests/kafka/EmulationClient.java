import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client (the 4.4 of compat-tests/.cache/kafka/libs) against a broker that is, or
 * emulates, Apache Kafka 3.6: what 3.6 had works (an idempotent producer, a consumer, the admin
 * calls 3.6 served, a transactional producer on transaction version 1), and the admin calls that need a version 3.6 lacked fail in the client with
 * UnsupportedVersionException, as they do against a real 3.6 broker. Run by
 * test-version-emulation.sh as a single-file program:
 *   run-class.sh EmulationClient.java BOOTSTRAP
 * Prints one "ok:" line per check; exits 1 at the first check that fails.
 */
public class EmulationClient {
    static final String TOPIC = "emulated";
    static final TopicPartition PARTITION = new TopicPartition(TOPIC, 0);
    static final String TXN_TOPIC = "emulated-txn";

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(TOPIC, 1, (short) 1), new NewTopic(TXN_TOPIC, 1, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);
            produce(bootstrap, 10);
            List<String> read = consume(bootstrap, 10);
            check(read.size() == 10 && read.get(9).equals("value-9"), "a 4.4 producer and consumer round trip: " + read);

            long max = admin.listOffsets(Map.of(PARTITION, OffsetSpec.maxTimestamp())).all()
                    .get(30, TimeUnit.SECONDS).get(PARTITION).offset();
            check(max == 9, "listOffsets(maxTimestamp), ListOffsets v7 (3.0): offset " + max);

            // ListOffsets v9 (3.9, KIP-1005): latest-tiered is refused by the client itself.
            unsupported(() -> admin.listOffsets(Map.of(PARTITION, OffsetSpec.latestTiered())).all()
                    .get(30, TimeUnit.SECONDS), "listOffsets(latestTiered), ListOffsets v9 (3.9)");
            // ListTransactions v1 (3.8, KIP-994): the duration filter likewise.
            unsupported(() -> admin.listTransactions(new ListTransactionsOptions().filterOnDuration(60_000)).all()
                    .get(30, TimeUnit.SECONDS), "listTransactions(filterOnDuration), ListTransactions v1 (3.8)");
            int listed = admin.listTransactions().all().get(30, TimeUnit.SECONDS).size();
            check(listed == 0, "listTransactions() without a filter, ListTransactions v0: " + listed + " transactions");

            // Transactions as 3.6 served them: no transaction.version feature, so the client
            // speaks transaction version 1 (AddPartitionsToTxn before the first send, EndTxn v3).
            List<String> committed = transact(bootstrap);
            check(committed.equals(List.of("committed-0", "committed-1")),
                    "a transactional producer commits and aborts (transaction version 1); read_committed: " + committed);
            String state = admin.describeTransactions(List.of(TXN_ID)).description(TXN_ID)
                    .get(30, TimeUnit.SECONDS).state().toString();
            check(state.equals("CompleteAbort"), "describeTransactions after the abort: " + state);
        }
    }

    static final String TXN_ID = "emulated-txn";

    /** Commits two records and aborts a third; returns what read_committed reads after them. */
    static List<String> transact(String bootstrap) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, TXN_ID);
        try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(TXN_TOPIC, 0, null, "committed-0"));
            producer.send(new ProducerRecord<>(TXN_TOPIC, 0, null, "committed-1"));
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(TXN_TOPIC, 0, null, "aborted-0")).get(30, TimeUnit.SECONDS);
            producer.abortTransaction();
        }
        Properties consumerProps = new Properties();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        TopicPartition tp = new TopicPartition(TXN_TOPIC, 0);
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(consumerProps, new StringDeserializer(), new StringDeserializer())) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            // Read up to the end offset (the abort marker + 1): every record read_committed serves.
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (consumer.position(tp) < end && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    values.add(r.value());
                }
            }
        }
        return values;
    }

    interface Call {
        void run() throws Exception;
    }

    static void unsupported(Call call, String what) throws Exception {
        try {
            call.run();
        } catch (ExecutionException e) {
            check(e.getCause() instanceof UnsupportedVersionException, what + ": " + e.getCause());
            return;
        }
        check(false, what + ": succeeded, but the release lacks its version");
    }

    static void produce(String bootstrap, int count) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(TOPIC, 0, "key-" + i, "value-" + i)).get(30, TimeUnit.SECONDS);
            }
        }
    }

    static List<String> consume(String bootstrap, int count) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.assign(List.of(PARTITION));
            consumer.seekToBeginning(List.of(PARTITION));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (values.size() < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    values.add(r.value());
                }
            }
        }
        return values;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAILED: " + what);
            System.exit(1);
        }
        System.out.println("ok: " + what);
    }
}
