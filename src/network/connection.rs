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
//!
//! On a TLS listener the TLS handshake comes first (a failed one closes the connection, as
//! Kafka's); on an SSL listener the client certificate gives the principal. Until a SASL
//! connection has authenticated, one request is handled at a time (as Kafka's authenticator
//! reads one token at a time) and frames are bounded by `sasl.server.max.receive.size`; which
//! requests are answered then, and how, is `api::sasl`'s. A SASL token after a v0 handshake
//! has no request header, so the frame goes to `api::sasl::raw_token` as it is.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::frame::{read_frame_body, read_frame_size, FrameError};
use super::transport::{split_plain, split_tls, ReadSide, WriteSide};
use crate::api::{self, Broker, Outcome, Session};
use crate::protocol::{api_versions_fallback, decode_request, DecodeError};
use crate::security::tls::TlsServer;
use crate::security::Principal;
use crate::time::{Clock, SystemClock};

type Reader = BufReader<ReadSide>;

/// The longest a client may take over its TLS handshake before the connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// What woke the connection's loop.
enum Event {
    Read(Reader, Result<Option<ReadRequest>, FrameError>),
    Handled(WriteSide, Box<Session>, Result<Option<Duration>, String>),
    Unmuted,
    Shutdown,
}

/// Serves one accepted connection on listener `listener` (its index in the config), doing the
/// TLS handshake first when `tls` is given.
pub async fn serve_connection(
    stream: TcpStream,
    broker: Arc<Broker>,
    listener: usize,
    tls: Option<Arc<TlsServer>>,
    shutdown: watch::Receiver<bool>,
) {
    let Ok(peer_addr) = stream.peer_addr() else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let sasl = broker.config.listeners[listener].protocol.uses_sasl();
    let (read_half, write_half, principal) = match tls {
        None => {
            let (r, w) = split_plain(stream);
            (r, w, Principal::anonymous())
        }
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config());
            let stream =
                match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        tracing::info!(peer = %peer_addr, "TLS handshake failed: {e}");
                        return;
                    }
                    Err(_) => {
                        tracing::info!(peer = %peer_addr, "TLS handshake timed out");
                        return;
                    }
                };
            // On SASL_SSL the principal comes from SASL; on SSL from the certificate.
            let principal = if sasl {
                Ok(Principal::anonymous())
            } else {
                tls.principal(stream.get_ref().1.peer_certificates())
            };
            let principal = match principal {
                Ok(p) => p,
                Err(e) => {
                    tracing::info!(peer = %peer_addr, "closing connection: {e}");
                    return;
                }
            };
            let (r, w) = split_tls(stream);
            (r, w, principal)
        }
    };
    let session = Session::new(listener, peer_addr, principal, sasl);
    serve(broker, read_half, write_half, session, shutdown).await;
}

async fn serve(
    broker: Arc<Broker>,
    read_half: ReadSide,
    write_half: WriteSide,
    session: Session,
    mut shutdown: watch::Receiver<bool>,
) {
    let peer = session.peer.to_string();
    let max_in_flight_authenticated = broker.config.max_in_flight_requests_per_connection.max(1);
    let memory = broker.request_memory.clone();
    let mut authenticated = session.is_authenticated();

    // Each future owns its half of the socket (and the session) and hands it back when it
    // completes; `None` in the slot means it is idle (or gone, once reading has stopped).
    let mut reader = Some(BufReader::new(read_half));
    let mut writer = Some(write_half);
    let mut session = Some(Box::new(session));
    let mut reading = pin!(None);
    let mut handling = pin!(None);
    let mut queued: VecDeque<ReadRequest> = VecDeque::with_capacity(max_in_flight_authenticated);
    let mut muted_until: Option<Instant> = None;
    let mut accepting = true;

    loop {
        let muted = muted_until.is_some();
        if !muted && handling.is_none() && !queued.is_empty() {
            if let (Some(request), Some(w), Some(s)) =
                (queued.pop_front(), writer.take(), session.take())
            {
                handling.set(Some(handle(&broker, request, w, s)));
            }
        }
        // Before authentication, one request at a time, each bounded as a SASL token.
        let (max_in_flight, max_frame_bytes) = if authenticated {
            (
                max_in_flight_authenticated,
                broker.config.socket_request_max_bytes,
            )
        } else {
            (1, broker.security.sasl_max_receive_bytes)
        };
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
                if let Poll::Ready((w, s, outcome)) = f.poll(cx) {
                    return Poll::Ready(Event::Handled(w, s, outcome));
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
            Event::Handled(w, s, outcome) => {
                handling.set(None);
                writer = Some(w);
                authenticated = s.is_authenticated();
                session = Some(s);
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

/// Handles one request with the writer and session it owns, and hands them back. The
/// request's memory is released once its response is written (or never will be).
async fn handle(
    broker: &Broker,
    request: ReadRequest,
    mut writer: WriteSide,
    mut session: Box<Session>,
) -> (WriteSide, Box<Session>, Result<Option<Duration>, String>) {
    let ReadRequest { frame, memory } = request;
    let outcome = process(broker, frame, &mut writer, &mut session).await;
    drop(memory);
    (writer, session, outcome)
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
    writer: &mut WriteSide,
    session: &mut Session,
) -> Result<Option<Duration>, String> {
    let request_bytes = frame.len();
    let outcome = if session.sasl.as_ref().is_some_and(|s| s.expects_raw_token()) {
        api::sasl::raw_token(broker, session, frame)
    } else {
        match decode_request(frame, &broker.versions) {
            Ok(request) => api::handle(broker, session, request, request_bytes).await,
            Err(DecodeError::ApiVersionsUnsupported { correlation_id }) => {
                Outcome::Respond(api_versions_fallback(correlation_id, &broker.versions))
            }
            Err(e) => Outcome::Close(e.to_string()),
        }
    };
    let (response, mute) = match outcome {
        Outcome::Respond(frame) => (Some(frame), None),
        Outcome::RespondFrame(frame) => {
            let written = writer.write_frame(&frame).await;
            return written.map(|()| None).map_err(|e| e.to_string());
        }
        Outcome::RespondAndClose {
            response,
            delay,
            reason,
        } => {
            // Kafka sends the failure, then closes after `connection.failed.authentication.delay.ms`.
            writer
                .write_bytes(&response)
                .await
                .map_err(|e| e.to_string())?;
            tokio::time::sleep(delay).await;
            return Err(reason);
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
        writer
            .write_bytes(&frame)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(mute)
}
