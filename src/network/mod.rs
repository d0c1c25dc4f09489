//! Sockets and framing only: the accept loop with its connection limit, and per connection the
//! length-prefixed frames, bounded read-ahead, and responses written strictly in request order.
//! No Kafka semantics live here beyond what Kafka's network layer does (closing on oversized
//! frames, unknown keys and unsupported versions). Fetched records are sent from segment files
//! with `sendfile` (`send.rs`): the network layer reads the file handles it is given, and never
//! opens a file itself. TLS listeners do their handshake here with the settings `security`
//! builds, and encrypt fetched records through a bounded buffer instead (`send.rs`). `http.rs`
//! is the separate HTTP endpoint: metrics, health and fault injection.

mod connection;
mod frame;
mod http;
mod listener;
mod send;
mod transport;

pub use http::{bind_http, serve_http, HttpState};
pub use listener::{bind, serve_listener, BoundListener};
