//! sluice: a Kafka-wire-compatible broker that stores partitions in Kafka's own segment format.
//!
//! A request travels down the modules in this order:
//!
//! ```text
//! embedded the broker started inside a Rust test (`EmbeddedBroker`), over `server`
//! server   lifecycle: start, background flush/checkpoint tasks, graceful shutdown
//! network  sockets, frames, bounded read-ahead, responses in request order
//! protocol bytes ⇄ typed messages (kafka-protocol), the supported-versions table
//! api      one file per Kafka API: request → response
//! quota    client quotas: rates → throttle time (the connection mutes the client)
//! storage  the log directory: topics, partition directories, checkpoints
//! group    the consumer-group coordinator (offsets in `__consumer_offsets`)
//! txn      the transaction coordinator (state in `__transaction_state`)
//! log      one partition: segments, offset and time indexes, recovery
//! record_batch  the RecordBatch format: header, records, codecs, Kafka's checks (pure)
//! metrics  counters and timers named after Kafka's JMX metrics (atomics; `/metrics`)
//! ```
//!
//! See ARCHITECTURE.md for the invariants each layer keeps.

pub mod alloc_guard;
pub mod api;
pub mod config;
pub mod disk;
pub mod embedded;
/// Entry points for the fuzz targets (`fuzz/`) and their corpus replay; not an API.
#[doc(hidden)]
pub mod fuzzing;
pub mod group;
pub mod log;
pub mod metrics;
pub mod network;
pub mod producer;
pub mod protocol;
pub mod quota;
pub mod record_batch;
pub mod security;
pub mod server;
pub mod storage;
pub mod time;
pub mod txn;

pub use embedded::{
    BlockingEmbeddedBroker, EmbeddedBroker, EmbeddedBrokerBuilder, FaultAction, FaultRule, Faults,
};
