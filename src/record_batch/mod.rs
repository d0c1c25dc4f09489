//! Kafka's v2 RecordBatch format (magic 2), the one batch format sluice stores, owned here and
//! nowhere else: the 61-byte header (`header`: fields, base offset, last offset, CRC-32C,
//! attributes, and the few in-place edits the broker makes), the records inside a batch (`walk`:
//! the bounded walk of a produced batch; `records`: offsets, timestamps and keys of a stored
//! one), building batches from plain records (`encode`), transaction markers (`control`), the codecs (`compression`: Kafka's
//! framing for each; `decompress`: streaming, size-capped decompression), Kafka's
//! `LogValidator` checks on a produced batch (`validate`) and its re-encoding into a topic's
//! codec (`recompress`).
//!
//! The module is pure and sits at the bottom of the crate: it does no I/O, holds no state and
//! imports nothing from the rest of sluice. Settings come in as plain values (`BatchLimits`,
//! `Recompression`); a refused batch is a `BatchError`, which `api::errors` turns into a Kafka
//! error code. `log`, `producer`, `storage` (`__consumer_offsets` for the group coordinator
//! included) and `api` all read and write batches through it.

pub mod compression;
pub mod control;
pub mod decompress;
pub mod encode;
pub mod header;
pub mod recompress;
pub mod records;
#[cfg(test)]
pub(crate) mod test_batches;
pub mod validate;
pub mod walk;

use std::fmt;

pub use header::{BatchHeader, RECORD_BATCH_OVERHEAD};
pub use recompress::Recompression;
pub use validate::BatchLimits;

/// Why a batch, or the records inside it, cannot be accepted or read. Each kind is one of the
/// distinctions Kafka's checks make; the text is the message a client is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// Malformed bytes: bad framing, CRC, varints, codec data (Kafka: CORRUPT_MESSAGE).
    Corrupt(String),
    /// Well-formed but not acceptable: counts, offsets, leftovers, missing keys, a batch that
    /// decompresses past the bound (INVALID_RECORD).
    InvalidRecord(String),
    /// Larger than `max.message.bytes`, before or after recompression (MESSAGE_TOO_LARGE).
    MessageTooLarge(String),
    /// A codec the request version may not use (UNSUPPORTED_COMPRESSION_TYPE).
    UnsupportedCompression(String),
    /// A timestamp out of the topic's bounds, or a producer setting LogAppendTime
    /// (INVALID_TIMESTAMP).
    InvalidTimestamp(String),
    /// Re-encoding into the topic's codec failed (UNKNOWN_SERVER_ERROR).
    RecompressFailed(String),
}

impl BatchError {
    /// The message for the client.
    pub fn message(&self) -> &str {
        match self {
            BatchError::Corrupt(message)
            | BatchError::InvalidRecord(message)
            | BatchError::MessageTooLarge(message)
            | BatchError::UnsupportedCompression(message)
            | BatchError::InvalidTimestamp(message)
            | BatchError::RecompressFailed(message) => message,
        }
    }

    /// The message, taken out of the error.
    pub fn into_message(self) -> String {
        self.message().to_owned()
    }
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for BatchError {}
