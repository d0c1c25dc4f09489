package dev.sluice.compat;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * The single-node broker under test. The environment chooses which:
 * <ul>
 *   <li>{@code SLUICE_BIN=/path/to/sluice}: start sluice on a free loopback port with a fresh data dir;</li>
 *   <li>{@code KAFKA_MANAGED=1}: start Apache Kafka the same way with {@code compat-tests/kafka/start-kafka.sh};</li>
 *   <li>{@code KAFKA_BOOTSTRAP=host:port}: use a running broker (tests that restart it are skipped with a reason).</li>
 * </ul>
 * With none of them set, every test fails with a usage message.
 */
public abstract class Broker implements AutoCloseable {
    static final int START_TIMEOUT_S = 60;
    static final int STOP_TIMEOUT_S = 30;

    final Path root;
    final int port;
    final Map<String, String> overrides;
    private final List<String> events = new ArrayList<>();
    private final long t0 = System.nanoTime();

    Broker(Path root, int port, Map<String, String> overrides) {
        this.root = root;
        this.port = port;
        this.overrides = overrides;
    }

    /** The broker chosen by the environment, not started yet; overrides are Kafka property names. */
    public static Broker fromEnv(String name, Map<String, String> overrides) throws IOException {
        String sluice = System.getenv("SLUICE_BIN");
        String external = System.getenv("KAFKA_BOOTSTRAP");
        boolean managed = "1".equals(System.getenv("KAFKA_MANAGED"));
        if (sluice != null && !sluice.isEmpty()) {
            return new SluiceBroker(Path.of(sluice), tempRoot(name), freePort(), overrides);
        }
        if (managed) {
            return new KafkaBroker(tempRoot(name), freePort(), overrides);
        }
        if (external != null && !external.isEmpty()) {
            return new ExternalBroker(external);
        }
        throw new IllegalStateException("No broker to test: set SLUICE_BIN=/path/to/sluice, KAFKA_MANAGED=1 "
                + "(Apache Kafka via compat-tests/kafka/start-kafka.sh) or KAFKA_BOOTSTRAP=host:port. "
                + "compat-tests/java/run.sh sets one for you.");
    }

    public String bootstrap() {
        return "127.0.0.1:" + port;
    }

    public int port() {
        return port;
    }

    /** Whether this harness can stop, kill and restart the broker. */
    public boolean controllable() {
        return true;
    }

    public abstract String kind();

    /** Starts (or restarts on the same data and port) and returns once the port accepts TCP. */
    public abstract void start() throws Exception;

    /** Graceful stop (SIGTERM), waiting for the process to exit. */
    public abstract void stop() throws Exception;

    /** A crash: SIGKILL, waiting for the process to be gone. */
    public abstract void kill() throws Exception;

    /** The last lines the broker printed, for failure reports. */
    public abstract String outputTail(int lines);

    public Path root() {
        return root;
    }

    void event(String text) {
        events.add(String.format("%.1fs %s", (System.nanoTime() - t0) / 1e9, text));
    }

    public String history() {
        return String.join("\n", events);
    }

    @Override
    public void close() throws Exception {
        stop();
    }

    // ---------------------------------------------------------------------------------------------

    static Path tempRoot(String name) throws IOException {
        return Files.createTempDirectory("java-compat-" + name + "-");
    }

    /** A bindable loopback port below Linux's ephemeral range, so a reconnecting client cannot
     * connect to itself on a stopped broker's port. */
    static int freePort() {
        for (int i = 0; i < 200; i++) {
            int p = ThreadLocalRandom.current().nextInt(20000, 32000);
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress("127.0.0.1", p));
                return p;
            } catch (IOException busy) {
                // try another
            }
        }
        throw new IllegalStateException("no free port in 20000-32000");
    }

    static boolean portOpen(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 500);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    static String tail(Path file, int lines) {
        try {
            List<String> all = Files.readAllLines(file, StandardCharsets.UTF_8);
            return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
        } catch (IOException e) {
            return "(no output: " + e + ")";
        }
    }

    // ---------------------------------------------------------------------------------------------

    static final class SluiceBroker extends Broker {
        private final Path bin;
        private Process proc;

        SluiceBroker(Path bin, Path root, int port, Map<String, String> overrides) {
            super(root, port, overrides);
            this.bin = bin;
        }

        @Override
        public String kind() {
            return "sluice";
        }

        Path output() {
            return root.resolve("broker.out");
        }

        @Override
        public void start() throws Exception {
            if (!Files.isExecutable(bin)) {
                throw new IllegalStateException("SLUICE_BIN=" + bin + " is not an executable");
            }
            Path data = Files.createDirectories(root.resolve("data"));
            List<String> cmd = new ArrayList<>(List.of(bin.toString(),
                    "--override", "listeners=PLAINTEXT://" + bootstrap(),
                    "--override", "log.dirs=" + data));
            overrides.forEach((k, v) -> {
                cmd.add("--override");
                cmd.add(k + "=" + v);
            });
            event("start sluice on " + bootstrap());
            proc = new ProcessBuilder(cmd)
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(output().toFile()))
                    .start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!portOpen(port)) {
                if (!proc.isAlive()) {
                    throw new IllegalStateException("sluice exited with " + proc.exitValue()
                            + " during startup:\n" + outputTail(40));
                }
                if (System.nanoTime() > deadline) {
                    proc.destroyForcibly();
                    throw new IllegalStateException("sluice did not open " + bootstrap() + " in 20 s:\n" + outputTail(40));
                }
                Thread.sleep(50);
            }
            event("port open");
        }

        @Override
        public void stop() throws Exception {
            if (proc == null || !proc.isAlive()) {
                return;
            }
            event("SIGTERM");
            proc.destroy(); // SIGTERM on Unix
            if (!proc.waitFor(STOP_TIMEOUT_S, TimeUnit.SECONDS)) {
                event("still alive after " + STOP_TIMEOUT_S + " s: SIGKILL");
                proc.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                throw new IllegalStateException("sluice ignored SIGTERM for " + STOP_TIMEOUT_S + " s");
            }
            event("exited with " + proc.exitValue());
        }

        @Override
        public void kill() throws Exception {
            if (proc != null && proc.isAlive()) {
                event("SIGKILL");
                proc.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }

        @Override
        public String outputTail(int lines) {
            return tail(output(), lines);
        }
    }

    static final class KafkaBroker extends Broker {
        private final Path scripts = Path.of(System.getProperty("compat.kafka.dir", "../kafka"));

        KafkaBroker(Path root, int port, Map<String, String> overrides) {
            super(root, port, overrides);
        }

        @Override
        public String kind() {
            return "kafka";
        }

        @Override
        public void start() throws Exception {
            List<String> cmd = new ArrayList<>(List.of(scripts.resolve("start-kafka.sh").toString(),
                    Integer.toString(port), root.toString()));
            overrides.forEach((k, v) -> cmd.add(k + "=" + v));
            event("start kafka on " + bootstrap());
            script(cmd, START_TIMEOUT_S + 30);
            event("port open");
        }

        @Override
        public void stop() throws Exception {
            if (Files.exists(root.resolve("kafka.pid"))) {
                event("stop-kafka.sh");
                script(List.of(scripts.resolve("stop-kafka.sh").toString(), root.toString()), STOP_TIMEOUT_S + 20);
            }
        }

        @Override
        public void kill() throws Exception {
            if (Files.exists(root.resolve("kafka.pid"))) {
                event("stop-kafka.sh --kill9");
                script(List.of(scripts.resolve("stop-kafka.sh").toString(), root.toString(), "--kill9"), 30);
            }
        }

        private void script(List<String> cmd, int timeoutS) throws Exception {
            Path log = root.resolve("scripts.out");
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
            if (!p.waitFor(timeoutS, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException(cmd + " took over " + timeoutS + " s:\n" + tail(log, 30));
            }
            if (p.exitValue() != 0) {
                throw new IllegalStateException(cmd + " exited with " + p.exitValue() + ":\n" + tail(log, 30));
            }
        }

        @Override
        public String outputTail(int lines) {
            return tail(root.resolve("kafka.out"), lines);
        }
    }

    static final class ExternalBroker extends Broker {
        private final String bootstrap;

        ExternalBroker(String bootstrap) {
            super(null, Integer.parseInt(bootstrap.substring(bootstrap.lastIndexOf(':') + 1)), Map.of());
            this.bootstrap = bootstrap;
        }

        @Override
        public String bootstrap() {
            return bootstrap;
        }

        @Override
        public boolean controllable() {
            return false;
        }

        @Override
        public String kind() {
            return "external";
        }

        @Override
        public void start() {
        }

        @Override
        public void stop() {
        }

        @Override
        public void kill() {
            throw new UnsupportedOperationException("cannot kill an external broker");
        }

        @Override
        public String outputTail(int lines) {
            return "(external broker at " + bootstrap + ": output not available)";
        }
    }
}
