//! One client connection. A reader reads frames ahead into a bounded queue and stops reading the
//! socket when the queue is full, so TCP pushes back on the client. A processor takes requests
//! one at a time, in order, and writes each response before handling the next: responses are
//! never reordered and a partition sees one connection's produces in the order they were sent.
//!
//! Two things stop a connection's reader. Broker-wide request memory: after a frame's size is
//! read and before its body is allocated, the reader takes that many byte permits from the
//! `queued.max.request.bytes` pool and holds them until the response is written; when the pool
//! is empty, no connection reads its socket. And throttling (KIP-219): after a response with a
//! throttle time, the connection is muted for that long, neither read nor processed. When a
//! reader finds the pool empty the broker logs it (at most every 10 s): the observable sign
//! that it is pushing back on its clients.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::frame::{read_frame_body, read_frame_size, FrameError};
use super::send::write_frame;
use crate::api::{self, Broker, Outcome};
use crate::protocol::{api_versions_fallback, decode_request, DecodeError};
use crate::time::{Clock, SystemClock};

pub async fn serve_connection(
    stream: TcpStream,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let _ = stream.set_nodelay(true);
    let (read_half, mut write_half) = stream.into_split();
    let peer_for_processor = peer.clone();
    let (queue, mut queued) =
        mpsc::channel::<ReadRequest>(broker.config.max_in_flight_requests_per_connection);
    let max_frame_bytes = broker.config.socket_request_max_bytes;
    let memory = broker.request_memory.clone();
    let mute = Mute::default();
    let mute = &mute;
    let mut processor_shutdown = shutdown.clone();

    let reader = async move {
        let mut read_half = BufReader::new(read_half);
        loop {
            let frame = tokio::select! {
                frame = async {
                    mute.wait().await;
                    read_request(&mut read_half, max_frame_bytes, memory.as_ref()).await
                } => frame,
                _ = shutdown.changed() => return,
            };
            match frame {
                Ok(Some(request)) => {
                    if queue.send(request).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::info!(%peer, "closing connection: {e}");
                    return;
                }
            }
        }
    };
    let processor = async {
        while let Some(ReadRequest { frame, memory }) = queued.recv().await {
            let processed = process(&broker, frame, &mut write_half, &peer_for_processor).await;
            // The response is written (or never will be): the request's memory is free.
            drop(memory);
            match processed {
                Ok(None) => {}
                Ok(Some(throttle)) => mute.hold(throttle, &mut processor_shutdown).await,
                Err(reason) => {
                    tracing::info!("closing connection: {reason}");
                    return;
                }
            }
        }
    };
    tokio::pin!(reader, processor);
    tokio::select! {
        _ = &mut processor => {}
        // The reader stopped (end of stream, bad frame or shutdown): answer what was already read.
        _ = &mut reader => processor.await,
    }
}

/// A request frame and the share of `queued.max.request.bytes` it holds until answered.
struct ReadRequest {
    frame: Bytes,
    memory: Option<OwnedSemaphorePermit>,
}

/// Reads the next frame, waiting for request memory between its size and its body.
async fn read_request<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_frame_bytes: usize,
    memory: Option<&Arc<Semaphore>>,
) -> Result<Option<ReadRequest>, FrameError> {
    let Some(len) = read_frame_size(reader, max_frame_bytes).await? else {
        return Ok(None);
    };
    let memory = match memory {
        // The pool holds at least `socket.request.max.bytes` (checked in config), so one
        // largest frame can always proceed once the others are answered.
        Some(pool) => {
            let permits = u32::try_from(len).unwrap_or(u32::MAX);
            let permit = match pool.clone().try_acquire_many_owned(permits) {
                Ok(permit) => Ok(permit),
                Err(_) => {
                    note_request_memory_exhausted(pool, len);
                    pool.clone().acquire_many_owned(permits).await
                }
            };
            Some(permit.map_err(|_| FrameError::Io(std::io::Error::other("pool closed")))?)
        }
        None => None,
    };
    let frame = read_frame_body(reader, len).await?;
    Ok(Some(ReadRequest { frame, memory }))
}

/// When the request memory pool was last reported exhausted, in ms since the Unix epoch.
static REQUEST_MEMORY_EXHAUSTED_LOGGED_MS: AtomicI64 = AtomicI64::new(0);
/// At most one report per this long: under a sustained flood every read would report.
const REQUEST_MEMORY_EXHAUSTED_LOG_INTERVAL_MS: i64 = 10_000;

/// Says (at most every 10 s) that `queued.max.request.bytes` is all taken and connections wait
/// for it before reading on: the moment the broker pushes back on its clients.
fn note_request_memory_exhausted(pool: &Semaphore, frame_bytes: usize) {
    let now_ms = SystemClock.now_ms();
    let last_ms = REQUEST_MEMORY_EXHAUSTED_LOGGED_MS.load(Ordering::Relaxed);
    if now_ms - last_ms < REQUEST_MEMORY_EXHAUSTED_LOG_INTERVAL_MS
        || REQUEST_MEMORY_EXHAUSTED_LOGGED_MS
            .compare_exchange(last_ms, now_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    tracing::info!(
        frame_bytes,
        free_bytes = pool.available_permits(),
        "request memory exhausted (queued.max.request.bytes): connections wait before reading more requests"
    );
}

/// Until when a throttled connection is muted (KIP-219).
#[derive(Default)]
struct Mute(Mutex<Option<Instant>>);

impl Mute {
    fn extend(&self, until: Instant) {
        let mut muted_until = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *muted_until = Some(muted_until.map_or(until, |current| current.max(until)));
    }

    /// Mutes the connection for `throttle` and waits it out (or until shutdown), so that no
    /// request already read is processed meanwhile either.
    async fn hold(&self, throttle: Duration, shutdown: &mut watch::Receiver<bool>) {
        let until = Instant::now() + throttle;
        self.extend(until);
        if !*shutdown.borrow() {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// Returns once the connection is not muted.
    async fn wait(&self) {
        loop {
            let muted_until = *self.0.lock().unwrap_or_else(|e| e.into_inner());
            match muted_until {
                Some(until) if until > Instant::now() => tokio::time::sleep_until(until).await,
                _ => return,
            }
        }
    }
}

/// Handles one frame and writes its response; returns how long to mute the connection after.
async fn process(
    broker: &Broker,
    frame: Bytes,
    writer: &mut OwnedWriteHalf,
    peer: &str,
) -> Result<Option<Duration>, String> {
    let request_bytes = frame.len();
    let outcome = match decode_request(frame) {
        Ok(request) => api::handle(broker, request, peer, request_bytes).await,
        Err(DecodeError::ApiVersionsUnsupported { correlation_id }) => {
            Outcome::Respond(api_versions_fallback(correlation_id))
        }
        Err(e) => Outcome::Close(e.to_string()),
    };
    let (response, mute) = match outcome {
        Outcome::Respond(frame) => (Some(frame), None),
        Outcome::RespondFrame(frame) => {
            let written = write_frame(writer.as_ref(), &frame).await;
            return written.map(|()| None).map_err(|e| e.to_string());
        }
        Outcome::NoResponse => (None, None),
        Outcome::Close(reason) => return Err(reason),
        Outcome::Throttle {
            response,
            throttle_ms,
        } => (
            response,
            Some(Duration::from_millis(throttle_ms.max(0) as u64)),
        ),
    };
    if let Some(frame) = response {
        writer.write_all(&frame).await.map_err(|e| e.to_string())?;
    }
    Ok(mute)
}
