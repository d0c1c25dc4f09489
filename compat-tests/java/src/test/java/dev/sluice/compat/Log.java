package dev.sluice.compat;

/** Lines that run.sh collects from the test output (timings, broker locations): "[compat] ...". */
final class Log {
    private Log() {
    }

    static void info(String format, Object... args) {
        System.out.println("[compat] " + String.format(format, args));
        System.out.flush();
    }
}
