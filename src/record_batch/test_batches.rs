//! Test batches shared by the tests of `record_batch` and `log`: one keyed record per timestamp,
//! built by kafka-protocol's encoder as a client would send it.

use bytes::Bytes;
use kafka_protocol::records::Compression;

use super::encode::{self, PlainRecord};
use super::header::{set_base_offset, BatchIter};

#[derive(Debug, Clone)]
pub(crate) struct BatchSpec {
    pub(crate) base_offset: i64,
    /// One record per timestamp.
    pub(crate) timestamps: Vec<i64>,
    pub(crate) compression: Compression,
    pub(crate) value_bytes: usize,
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec {
            base_offset: 0,
            timestamps: vec![0],
            compression: Compression::None,
            value_bytes: 10,
        }
    }
}

/// One v2 batch built by kafka-protocol's encoder, as a client would send it.
pub(crate) fn encode_batch(spec: &BatchSpec) -> Vec<u8> {
    let records = spec.timestamps.iter().enumerate().map(|(n, timestamp)| {
        PlainRecord::new(
            Some(Bytes::from(format!("key-{n}"))),
            Some(Bytes::from(vec![b'a' + (n % 26) as u8; spec.value_bytes])),
            *timestamp,
        )
    });
    let mut batch = encode::batch(records, spec.compression)
        .expect("encode")
        .to_vec();
    set_base_offset(&mut batch, spec.base_offset);
    assert_eq!(BatchIter::new(&batch).count(), 1, "exactly one batch");
    batch
}
