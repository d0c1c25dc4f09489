//! A v2 batch built from plain records, as a producer without idempotence or transactions sends
//! one: base offset 0, no producer id, CreateTime, one batch however many records. The broker
//! writes `__consumer_offsets` batches this way; tests and benchmarks build what clients would
//! send; `transactional_batch` is the same with a transaction's producer id and epoch. The
//! encoding itself is kafka-protocol's.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One record: key and value (None is null), timestamp and headers.
#[derive(Debug, Clone, Default)]
pub struct PlainRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub timestamp_ms: i64,
    pub headers: IndexMap<StrBytes, Option<Bytes>>,
}

impl PlainRecord {
    pub fn new(key: Option<Bytes>, value: Option<Bytes>, timestamp_ms: i64) -> PlainRecord {
        PlainRecord {
            key,
            value,
            timestamp_ms,
            headers: IndexMap::new(),
        }
    }
}

/// The records as one v2 batch in `compression`; the encoder's error as text.
pub fn batch(
    records: impl IntoIterator<Item = PlainRecord>,
    compression: Compression,
) -> Result<Bytes, String> {
    encode(records, compression, None)
}

/// The producer of a transactional batch the broker writes itself (the group coordinator's
/// transactional offset commits): its id and epoch; the batch carries no sequence, as Kafka's
/// coordinator writes carry none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionalProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// The records as one uncompressed, transactional v2 batch of `producer`.
pub fn transactional_batch(
    records: impl IntoIterator<Item = PlainRecord>,
    producer: TransactionalProducer,
) -> Result<Bytes, String> {
    encode(records, Compression::None, Some(producer))
}

fn encode(
    records: impl IntoIterator<Item = PlainRecord>,
    compression: Compression,
    producer: Option<TransactionalProducer>,
) -> Result<Bytes, String> {
    let (producer_id, producer_epoch) =
        producer.map_or((-1, -1), |p| (p.producer_id, p.producer_epoch));
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, record)| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch where sequences are not consecutive.
            sequence: i as i32 - 1,
            timestamp: record.timestamp_ms,
            key: record.key,
            value: record.value,
            headers: record.headers,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).map_err(|e| format!("{e:#}"))?;
    Ok(buf.freeze())
}
