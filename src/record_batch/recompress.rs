//! A topic's `compression.type` when it names a codec: Kafka re-encodes a produced batch whose
//! codec differs (`uncompressed` decompresses it) before assigning offsets. The records inside
//! are the same bytes either way, so sluice decompresses the body, compresses it with the
//! topic's codec, and rewrites only the header fields that change: length, attributes (codec
//! bits) and the CRC. A batch already in the topic's codec, and every batch of a `producer`
//! topic, passes through untouched, without a copy.
//!
//! The batch has been validated (`validate`) before it gets here, so its records are
//! well formed and decompress within the bound that validation enforced.

use std::io::Read;

use bytes::Bytes;

use super::compression::compress;
use super::decompress::decompressor;
use super::header::{self, BatchHeader, RECORD_BATCH_OVERHEAD};
use super::validate::decompression_bound;
use super::BatchError;

/// The topic settings a re-encoding follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recompression {
    /// The codec `compression.type` names, or None for `producer` (keep the batch's).
    pub compression_codec: Option<u8>,
    /// `compression.<codec>.level`, or None for Kafka's default level.
    pub compression_level: Option<i32>,
    /// `max.message.bytes`: the re-encoded batch must still fit.
    pub max_message_bytes: i32,
}

/// `records` (one validated batch) in the topic's codec: the same bytes when the topic's
/// `compression.type` is `producer` or already the batch's codec, otherwise a re-encoded
/// batch, refused with MessageTooLarge when it no longer fits `max.message.bytes`.
pub fn to_topic_codec(
    records: Bytes,
    header: &BatchHeader,
    settings: &Recompression,
) -> Result<Bytes, BatchError> {
    let max_message_bytes = settings.max_message_bytes;
    let codec = header.compression();
    let Some(target) = settings.compression_codec.filter(|t| *t != codec) else {
        return Ok(records);
    };
    let end = header.total_size().min(records.len());
    let max_bytes = decompression_bound(max_message_bytes);
    let plain = decompress(codec, &records[RECORD_BATCH_OVERHEAD..end], max_bytes)?;
    let body = compress(target, &plain, settings.compression_level).map_err(|e| {
        BatchError::RecompressFailed(format!("recompressing the batch failed: {e}"))
    })?;
    let batch = header::with_records(&records[..RECORD_BATCH_OVERHEAD], &body, target);
    if batch.len() > usize::try_from(max_message_bytes).unwrap_or(0) {
        return Err(BatchError::MessageTooLarge(format!(
            "batch of {} bytes after recompression exceeds max.message.bytes {max_message_bytes}",
            batch.len()
        )));
    }
    Ok(Bytes::from(batch))
}

fn decompress(codec: u8, body: &[u8], max_bytes: u64) -> Result<Vec<u8>, BatchError> {
    let corrupt = BatchError::Corrupt;
    let reader = decompressor(codec, body, max_bytes).map_err(|e| corrupt(e.to_string()))?;
    let mut plain = Vec::new();
    reader
        .take(max_bytes + 1)
        .read_to_end(&mut plain)
        .map_err(|e| corrupt(e.to_string()))?;
    if plain.len() as u64 > max_bytes {
        return Err(corrupt("batch decompresses past the broker's bound".into()));
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::super::encode::{self, PlainRecord};
    use super::*;
    use kafka_protocol::records::{Compression, RecordBatchDecoder};

    fn batch(count: usize, compression: Compression) -> Bytes {
        let records = (0..count).map(|i| {
            PlainRecord::new(
                Some(Bytes::from(format!("key-{i}"))),
                Some(Bytes::from(format!("value {i} ").repeat(20))),
                1_700_000_000_000 + i as i64,
            )
        });
        encode::batch(records, compression).unwrap()
    }

    fn settings(codec: Option<u8>, max_message_bytes: i32) -> Recompression {
        Recompression {
            compression_codec: codec,
            // A topic's default: Kafka's level for the codec.
            compression_level: None,
            max_message_bytes,
        }
    }

    #[test]
    fn every_codec_pair_keeps_the_records_and_a_valid_crc() {
        let codecs = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ];
        for from in codecs {
            let original = batch(500, from);
            let header = BatchHeader::parse(&original).unwrap();
            for (target, _) in codecs.iter().enumerate() {
                let out = to_topic_codec(
                    original.clone(),
                    &header,
                    &settings(Some(target as u8), 1 << 20),
                )
                .unwrap_or_else(|e| panic!("{from:?} -> {target}: {}", e.message()));
                let new_header = BatchHeader::parse(&out).unwrap();
                assert_eq!(new_header.compression(), target as u8);
                assert_eq!(new_header.total_size(), out.len());
                assert!(header::crc_is_valid(&out), "{from:?} -> {target}");
                let mut bytes = out.clone();
                let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
                assert_eq!(set.records.len(), 500);
                assert_eq!(set.records[499].key.as_deref(), Some(&b"key-499"[..]));
            }
        }
    }

    #[test]
    fn matching_codec_and_producer_keep_the_same_bytes() {
        let original = batch(10, Compression::Lz4);
        let header = BatchHeader::parse(&original).unwrap();
        let same = to_topic_codec(original.clone(), &header, &settings(Some(3), 1 << 20)).unwrap();
        assert_eq!(same.as_ptr(), original.as_ptr(), "no copy");
        let kept = to_topic_codec(original.clone(), &header, &settings(None, 1 << 20)).unwrap();
        assert_eq!(kept.as_ptr(), original.as_ptr());
    }

    #[test]
    fn a_batch_that_grows_past_the_limit_is_refused() {
        let original = batch(2000, Compression::Zstd);
        let header = BatchHeader::parse(&original).unwrap();
        let refused =
            to_topic_codec(original.clone(), &header, &settings(Some(0), 8192)).unwrap_err();
        assert!(
            matches!(refused, BatchError::MessageTooLarge(_)),
            "MESSAGE_TOO_LARGE: {refused:?}"
        );
    }
}
