//! The accept loop. At most `max.connections` connections are served at once; past that the
//! loop stops accepting and new clients wait in the kernel's backlog. A connection from an ip
//! over its `connection_creation_rate` is held unread for the throttle time and then closed
//! unserved, as Kafka's acceptor does (KIP-612). The limit is shared by every listener. Each
//! connection served is counted for the metrics while it is open; while the refuse-connections
//! fault is armed, every listener closes new connections at once.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};

use super::connection::serve_connection;
use crate::api::Broker;
use crate::security::tls::TlsServer;

/// One bound listener: its index in `Config::listeners` and, on SSL and SASL_SSL, its TLS
/// settings.
pub struct BoundListener {
    pub socket: TcpListener,
    pub index: usize,
    pub tls: Option<Arc<TlsServer>>,
}

/// Binds the listening socket on `host:port` (port 0: any free port).
pub async fn bind(host: &str, port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind((host, port)).await
}

/// Accepts until shutdown. Each connection task holds a clone of `drain`; the server knows all
/// connections have finished when every clone is dropped.
pub async fn serve_listener(
    bound: BoundListener,
    broker: Arc<Broker>,
    permits: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) {
    let BoundListener {
        socket: listener,
        index,
        tls,
    } = bound;
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => return },
            _ = shutdown.changed() => return,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let now_ms = broker.clock.now_ms();
                let throttle_ms = broker.quotas.record_connection(peer.ip(), now_ms);
                if throttle_ms > 0 {
                    tracing::debug!(%peer, throttle_ms, "connection creation rate exceeded");
                    let delay = std::time::Duration::from_millis(throttle_ms as u64);
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        drop(stream);
                        drop(permit);
                    });
                    continue;
                }
                if broker.faults.refuses_connections() {
                    tracing::debug!(%peer, "fault injection: connection refused");
                    drop(stream);
                    continue;
                }
                let open = broker.metrics.connection_opened();
                let broker = broker.clone();
                let shutdown = shutdown.clone();
                let drain = drain.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    serve_connection(stream, broker, index, tls, shutdown).await;
                    drop(open);
                    drop(permit);
                    drop(drain);
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}
