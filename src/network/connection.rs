//! One client connection. Requests are read ahead into a queue and handled one at a time, in
//! order, each response written before the next request is handled: responses are never
//! reordered and a partition sees one connection's produces in the order they were sent.
//! A request holds one of `sluice.max.in.flight.requests.per.connection` slots from before its
//! frame is read until its response is written, so with every slot taken the socket is not
//! read and TCP pushes back on the client (with 1, a connection is served as Kafka serves it:
//! the next request is read only after the previous one is answered).
//!
//! Reading and handling are two futures driven by one loop in the connection's task, not two
//! tasks or two futures joined by a channel: a frame that finishes reading is handled in the
//! same poll, with no wake-up in between. A channel's hand-off wakes the task from inside its
//! own poll, which tokio's multi-threaded scheduler answers by re-queueing the task and waking
//! another worker to steal it; on a request-per-round-trip load (a consumer's fetches) that
//! hand-off was a quarter of the broker's CPU.
//!
//! Two things stop a connection's reading. Broker-wide request memory: after a frame's size is
//! read and before its body is allocated, the reader takes that many byte permits from the
//! `queued.max.request.bytes` pool and holds them until the response is written; when the pool
//! is empty, no connection reads its socket. And throttling (KIP-219): after a response with a
//! throttle time, the connection is muted for that long, neither read nor processed. When a
//! reader finds the pool empty the broker logs it (at most every 10 s): the observable sign
//! that it is pushing back on its clients.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::frame::{read_frame_body, read_frame_size, FrameError};
use super::send::write_frame;
use crate::api::{self, Broker, Outcome};
use crate::protocol::{api_versions_fallback, decode_request, DecodeError};
use crate::time::{Clock, SystemClock};

type Reader = BufReader<OwnedReadHalf>;

/// What woke the connection's loop.
enum Event {
    Read(Reader, Result<Option<ReadRequest>, FrameError>),
    Handled(OwnedWriteHalf, Result<Option<Duration>, String>),
    Unmuted,
    Shutdown,
}

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
    let (read_half, write_half) = stream.into_split();
    let max_in_flight = broker.config.max_in_flight_requests_per_connection.max(1);
    let max_frame_bytes = broker.config.socket_request_max_bytes;
    let memory = broker.request_memory.clone();

    // Each future owns its half of the socket and hands it back when it completes; `None` in
    // the slot means the half is idle (or gone, once reading has stopped).
    let mut reader = Some(BufReader::new(read_half));
    let mut writer = Some(write_half);
    let mut reading = pin!(None);
    let mut handling = pin!(None);
    let mut queued: VecDeque<ReadRequest> = VecDeque::with_capacity(max_in_flight);
    let mut muted_until: Option<Instant> = None;
    let mut accepting = true;

    loop {
        let muted = muted_until.is_some();
        if !muted && handling.is_none() && !queued.is_empty() {
            if let (Some(request), Some(w)) = (queued.pop_front(), writer.take()) {
                handling.set(Some(handle(&broker, request, w, &peer)));
            }
        }
        // A read takes a slot before it starts; slots are held until the response is written.
        let in_flight = queued.len() + usize::from(handling.is_some());
        if accepting && !muted && in_flight < max_in_flight {
            if let Some(r) = reader.take() {
                reading.set(Some(read_next(r, max_frame_bytes, memory.clone())));
            }
        }
        if !accepting && reading.is_none() && handling.is_none() && queued.is_empty() {
            return;
        }

        let mut changed = pin!(shutdown.changed());
        let mut unmute = pin!(muted_until.map(tokio::time::sleep_until));
        let event = poll_fn(|cx| {
            if let Some(f) = handling.as_mut().as_pin_mut() {
                if let Poll::Ready((w, outcome)) = f.poll(cx) {
                    return Poll::Ready(Event::Handled(w, outcome));
                }
            }
            if let Some(f) = reading.as_mut().as_pin_mut() {
                if let Poll::Ready((r, frame)) = f.poll(cx) {
                    return Poll::Ready(Event::Read(r, frame));
                }
            }
            if let Some(sleep) = unmute.as_mut().as_pin_mut() {
                if sleep.poll(cx).is_ready() {
                    return Poll::Ready(Event::Unmuted);
                }
            }
            if accepting && changed.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Shutdown);
            }
            Poll::Pending
        })
        .await;

        match event {
            Event::Handled(w, outcome) => {
                handling.set(None);
                writer = Some(w);
                match outcome {
                    Ok(None) => {}
                    Ok(Some(throttle)) if accepting => {
                        let until = Instant::now() + throttle;
                        muted_until = Some(muted_until.map_or(until, |u| u.max(until)));
                    }
                    // Shutting down: answer what was read without waiting out the throttle.
                    Ok(Some(_)) => {}
                    Err(reason) => {
                        tracing::info!(%peer, "closing connection: {reason}");
                        return;
                    }
                }
            }
            Event::Read(r, frame) => {
                reading.set(None);
                match frame {
                    Ok(Some(request)) => {
                        reader = Some(r);
                        queued.push_back(request);
                    }
                    // End of stream or a bad frame: answer what was already read, then close.
                    Ok(None) => accepting = false,
                    Err(e) => {
                        tracing::info!(%peer, "closing connection: {e}");
                        accepting = false;
                    }
                }
            }
            Event::Unmuted => muted_until = None,
            Event::Shutdown => {
                // Stop reading (a frame half read is dropped) and answer what was read.
                accepting = false;
                reading.set(None);
                muted_until = None;
            }
        }
    }
}

/// Reads the next frame with the reader it owns, and hands the reader back.
async fn read_next(
    mut reader: Reader,
    max_frame_bytes: usize,
    memory: Option<Arc<Semaphore>>,
) -> (Reader, Result<Option<ReadRequest>, FrameError>) {
    let frame = read_request(&mut reader, max_frame_bytes, memory.as_ref()).await;
    (reader, frame)
}

/// Handles one request with the writer it owns, and hands the writer back. The request's
/// memory is released once its response is written (or never will be).
async fn handle(
    broker: &Broker,
    request: ReadRequest,
    mut writer: OwnedWriteHalf,
    peer: &str,
) -> (OwnedWriteHalf, Result<Option<Duration>, String>) {
    let ReadRequest { frame, memory } = request;
    let outcome = process(broker, frame, &mut writer, peer).await;
    drop(memory);
    (writer, outcome)
}

/// A request frame and its share of `queued.max.request.bytes`, held until it is answered.
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

/// Handles one frame and writes its response; returns how long to mute the connection after.
async fn process(
    broker: &Broker,
    frame: Bytes,
    writer: &mut OwnedWriteHalf,
    peer: &str,
) -> Result<Option<Duration>, String> {
    let request_bytes = frame.len();
    let outcome = match decode_request(frame, &broker.versions) {
        Ok(request) => api::handle(broker, request, peer, request_bytes).await,
        Err(DecodeError::ApiVersionsUnsupported { correlation_id }) => {
            Outcome::Respond(api_versions_fallback(correlation_id, &broker.versions))
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
