//! How long a request handler kept a worker thread busy: the time spent inside its polls, not
//! the time it sat parked (a long-polling fetch, a join waiting for the rebalance). This is what
//! `request_percentage` charges, as Kafka charges request-handler thread time, not wall time.

use std::future::Future;
use std::time::{Duration, Instant};

/// Runs `future` to completion; returns its output and the time spent polling it.
pub async fn busy_time<F: Future>(future: F) -> (F::Output, Duration) {
    let mut future = std::pin::pin!(future);
    let mut busy = Duration::ZERO;
    let output = std::future::poll_fn(|cx| {
        let started = Instant::now();
        let poll = future.as_mut().poll(cx);
        busy += started.elapsed();
        poll
    })
    .await;
    (output, busy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parked_time_is_not_busy_time() {
        let (value, busy) = busy_time(async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            std::thread::sleep(Duration::from_millis(20));
            7
        })
        .await;
        assert_eq!(value, 7);
        assert!(busy >= Duration::from_millis(20), "{busy:?}");
        // Far below the 500 ms parked, with room for a loaded machine descheduling the thread
        // during its 20 ms of work.
        assert!(busy < Duration::from_millis(250), "{busy:?}");
    }
}
