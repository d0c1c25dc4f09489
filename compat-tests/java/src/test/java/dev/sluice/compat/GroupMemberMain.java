package dev.sluice.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * A group member in its own JVM, so a test can crash it with SIGKILL (no LeaveGroup, no more
 * heartbeats). Usage: GroupMemberMain bootstrap topic group assignorClass. It prints one line per
 * event, flushed before the offsets are committed:
 * "ASSIGNED p,p", "REVOKED p,p", "LOST p,p", "RECORD partition offset value".
 */
public final class GroupMemberMain {
    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        Map<String, Object> config = GroupMember.config(args[2], args[3]);
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, config)) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    say("REVOKED " + ids(partitions));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    say("ASSIGNED " + ids(partitions));
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    say("LOST " + ids(partitions));
                }
            });
            long deadline = System.nanoTime() + Duration.ofMinutes(5).toNanos(); // never outlive a test
            while (System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    say("RECORD " + r.partition() + " " + r.offset() + " " + new String(r.value(), StandardCharsets.UTF_8));
                }
                if (!records.isEmpty()) {
                    try {
                        String positions = GroupMember.positions(c).toString().replace(" ", "");
                        c.commitSync(Duration.ofSeconds(15));
                        say("COMMITTED " + positions);
                    } catch (RuntimeException e) {
                        System.err.println("commit failed (records will be redelivered): " + e);
                    }
                }
            }
        }
    }

    static String ids(Collection<TopicPartition> partitions) {
        return partitions.stream().map(tp -> Integer.toString(tp.partition())).collect(Collectors.joining(","));
    }

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
