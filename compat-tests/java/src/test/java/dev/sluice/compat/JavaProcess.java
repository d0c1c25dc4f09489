package dev.sluice.compat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs a main class from this suite's class path (Kafka's tools, or a helper) in a child JVM. */
final class JavaProcess {
    private JavaProcess() {
    }

    static ProcessBuilder builder(String mainClass, List<String> args) {
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8",
                "-cp", System.getProperty("java.class.path"), mainClass));
        cmd.addAll(args);
        return new ProcessBuilder(cmd);
    }

    /** What a finished tool run printed. */
    record Result(String command, int exit, String out, String err) {
        @Override
        public String toString() {
            return command + "\n-> exit " + exit + "\n--- stdout\n" + out + "\n--- stderr\n" + err;
        }
    }

    /** Runs to completion (killed after the timeout), feeding stdin, and returns what it printed. */
    static Result run(Duration timeout, String stdin, String mainClass, String... args) throws Exception {
        String command = mainClass.substring(mainClass.lastIndexOf('.') + 1) + " " + String.join(" ", args);
        Process p = builder(mainClass, List.of(args)).start();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Thread o = pump(p.getInputStream(), out);
        Thread e = pump(p.getErrorStream(), err);
        try (OutputStream in = p.getOutputStream()) {
            if (stdin != null) {
                in.write(stdin.getBytes(StandardCharsets.UTF_8));
            }
        }
        boolean done = p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
        if (!done) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        o.join(5000);
        e.join(5000);
        Result r = new Result(command, done ? p.exitValue() : -1,
                out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        System.out.println("=== " + r + "\n===");
        if (!done) {
            throw new AssertionError("timed out after " + timeout.toSeconds() + " s: " + r);
        }
        return r;
    }

    private static Thread pump(InputStream from, ByteArrayOutputStream to) {
        Thread t = new Thread(() -> {
            try {
                from.transferTo(to);
            } catch (IOException ignored) {
                // the process was killed
            }
        });
        t.setDaemon(true);
        t.start();
        return t;
    }
}
