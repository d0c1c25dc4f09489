package dev.sluice.compat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * One broker per test class: started before the first test, stopped after the last. When a test
 * fails, the broker's history and the tail of its output are printed to the test's stderr
 * (target/surefire-reports/&lt;class&gt;-output.txt), and its data dir is kept for inspection.
 * Use as {@code @RegisterExtension static final BrokerExtension BROKER = new BrokerExtension();}
 */
public final class BrokerExtension implements BeforeAllCallback, AfterAllCallback, TestWatcher {
    private final Map<String, String> overrides;
    private Broker broker;
    private boolean failed;

    public BrokerExtension() {
        this(Map.of());
    }

    public BrokerExtension(Map<String, String> overrides) {
        this.overrides = overrides;
    }

    public Broker broker() {
        if (broker == null) {
            throw new IllegalStateException("broker not started");
        }
        return broker;
    }

    public String bootstrap() {
        return broker().bootstrap();
    }

    /** For tests that stop, kill or restart the broker: skipped, with the reason, on KAFKA_BOOTSTRAP. */
    public Broker controllable() {
        Assumptions.assumeTrue(broker().controllable(),
                "needs a broker this harness can restart (SLUICE_BIN or KAFKA_MANAGED), not KAFKA_BOOTSTRAP");
        return broker;
    }

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        broker = Broker.fromEnv(context.getRequiredTestClass().getSimpleName(), overrides);
        try {
            broker.start();
        } catch (Exception e) {
            failed = true;
            throw e;
        }
        Log.info("%s: %s broker at %s, dir %s", context.getRequiredTestClass().getSimpleName(),
                broker.kind(), broker.bootstrap(), broker.root());
    }

    @Override
    public void afterAll(ExtensionContext context) throws Exception {
        if (broker == null) {
            return;
        }
        try {
            broker.stop();
        } finally {
            Path root = broker.root();
            if (root != null && !failed && context.getExecutionException().isEmpty()) {
                deleteTree(root);
            } else if (root != null) {
                Log.info("kept the broker's dir for inspection: %s", root);
            }
        }
    }

    @Override
    public void testFailed(ExtensionContext context, Throwable cause) {
        failed = true;
        if (broker != null) {
            System.err.printf("%n===== %s failed: %s%n----- broker history (%s at %s)%n%s%n----- broker output, last 60 lines%n%s%n=====%n",
                    context.getDisplayName(), cause, broker.kind(), broker.bootstrap(), broker.history(),
                    broker.outputTail(60));
        }
    }

    static void deleteTree(Path root) {
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (Exception e) {
            Log.info("could not delete %s: %s", root, e);
        }
    }
}
