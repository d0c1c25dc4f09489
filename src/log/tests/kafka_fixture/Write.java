// Writes src/log/tests/kafka_fixture with Apache Kafka 4.1.0's own LogSegment, so that
// kafka_compat.rs can compare sluice's files with Kafka's byte for byte. Regenerate with:
//   javac -cp 'kafka-libs/*' Write.java && java -cp 'kafka-libs/*:.' Write <dir>
// where kafka-libs holds org.apache.kafka:kafka_2.13:4.1.0 and its dependencies.
import java.io.File;
import java.util.*;
import org.apache.kafka.common.record.*;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.storage.internals.log.*;

public class Write {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        Map<String, Object> props = new HashMap<>();
        props.put("segment.index.bytes", 10485760);
        props.put("index.interval.bytes", 1024);
        LogConfig config = new LogConfig(props);
        long next = 0;
        for (int s = 0; s < 2; s++) {
            LogSegment seg = LogSegment.open(dir, next, config, Time.SYSTEM, 0, false);
            for (int n = 0; n < 40; n++) {
                int count = 1 + n % 5;
                SimpleRecord[] recs = new SimpleRecord[count];
                long maxTs = -1; int maxAt = 0;
                for (int i = 0; i < count; i++) {
                    long ts = 1_700_000_000_000L + s * 1_000_000 + n * 1000 + (i * 37) % 11;
                    if (ts > maxTs) { maxTs = ts; maxAt = i; }
                    recs[i] = new SimpleRecord(ts, ("k" + n).getBytes(), ("value " + n + " " + "y".repeat(n % 60)).getBytes());
                }
                Compression c = (n % 3 == 0) ? Compression.gzip().build() : (n % 3 == 1 ? Compression.NONE : Compression.lz4().build());
                MemoryRecords mr = MemoryRecords.withRecords(next, c, recs);
                long last = next + count - 1;
                seg.append(last, mr);
                next = last + 1;
            }
            seg.onBecomeInactiveSegment();
            seg.flush();
            seg.close();
        }
        System.out.println("next offset " + next);
    }
}
