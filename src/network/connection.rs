//! One client connection. A reader reads frames ahead into a bounded queue and stops reading the
//! socket when the queue is full, so TCP pushes back on the client. A processor takes requests
//! one at a time, in order, and writes each response before handling the next: responses are
//! never reordered and a partition sees one connection's produces in the order they were sent.

use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use super::frame::read_frame;
use crate::api::{self, Broker, Outcome};
use crate::protocol::{api_versions_fallback, decode_request, DecodeError};

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
        mpsc::channel::<Bytes>(broker.config.max_in_flight_requests_per_connection);
    let max_frame_bytes = broker.config.socket_request_max_bytes;

    let reader = async move {
        let mut read_half = BufReader::new(read_half);
        loop {
            let frame = tokio::select! {
                frame = read_frame(&mut read_half, max_frame_bytes) => frame,
                _ = shutdown.changed() => return,
            };
            match frame {
                Ok(Some(frame)) => {
                    if queue.send(frame).await.is_err() {
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
        while let Some(frame) = queued.recv().await {
            if let Err(reason) = process(&broker, frame, &mut write_half, &peer_for_processor).await
            {
                tracing::info!("closing connection: {reason}");
                return;
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

async fn process(
    broker: &Broker,
    frame: Bytes,
    writer: &mut OwnedWriteHalf,
    peer: &str,
) -> Result<(), String> {
    let outcome = match decode_request(frame) {
        Ok(request) => api::handle(broker, request, peer).await,
        Err(DecodeError::ApiVersionsUnsupported { correlation_id }) => {
            Outcome::Respond(api_versions_fallback(correlation_id))
        }
        Err(e) => Outcome::Close(e.to_string()),
    };
    match outcome {
        Outcome::Respond(frame) => writer.write_all(&frame).await.map_err(|e| e.to_string()),
        Outcome::NoResponse => Ok(()),
        Outcome::Close(reason) => Err(reason),
    }
}
