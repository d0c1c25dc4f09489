package dev.sluice.compat;

import java.time.Duration;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/** Bounded waiting: every wait in this suite has a deadline and says what it waited for. */
final class Wait {
    private Wait() {
    }

    static void until(Duration timeout, String what, BooleanSupplier condition) throws InterruptedException {
        until(timeout, () -> what, condition);
    }

    static void until(Duration timeout, Supplier<String> what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for: " + what.get());
            }
            Thread.sleep(50);
        }
    }
}
