//! Compressing a batch's records in Kafka's framing for each codec, at Kafka's default levels:
//! what a topic's `compression.type` re-encodes produced batches with, and what the log cleaner
//! re-encodes a compacted batch's surviving records with. Decompression is kafka-protocol's
//! (`records.rs`) or the bounded streaming decoder's (`decompress.rs`).

use std::io::Write;

/// The snappy framing Kafka's Java client writes (xerial): magic, version 1, compatible 1,
/// then blocks of at most 32 KiB, each prefixed by its compressed length.
const XERIAL_HEADER: [u8; 16] = [
    0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
];
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// Kafka's default levels (`compression.gzip.level` -1 is zlib's default, 6).
const GZIP_LEVEL: u32 = 6;
const LZ4_LEVEL: u32 = 9;
const ZSTD_LEVEL: i32 = 3;

/// The records `plain` in `codec`'s framing, as Kafka's clients read it, at `level` (the
/// topic's `compression.<codec>.level`) or Kafka's default level.
pub fn compress(codec: u8, plain: &[u8], level: Option<i32>) -> std::io::Result<Vec<u8>> {
    match codec {
        0 => Ok(plain.to_vec()),
        1 => {
            let mut encoder = flate2::write::GzEncoder::new(
                Vec::with_capacity(plain.len() / 2),
                // -1 is zlib's default.
                flate2::Compression::new(match level {
                    Some(l @ 0..=9) => l as u32,
                    _ => GZIP_LEVEL,
                }),
            );
            encoder.write_all(plain)?;
            encoder.finish()
        }
        2 => {
            let mut out = XERIAL_HEADER.to_vec();
            let mut encoder = snap::raw::Encoder::new();
            for block in plain.chunks(XERIAL_BLOCK_BYTES) {
                let compressed = encoder.compress_vec(block).map_err(std::io::Error::other)?;
                out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
        3 => {
            // Independent blocks: Kafka's Java reader decompresses each block on its own.
            let mut encoder = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .block_checksum(lz4::liblz4::BlockChecksum::NoBlockChecksum)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .level(
                    level
                        .and_then(|l| u32::try_from(l).ok())
                        .unwrap_or(LZ4_LEVEL),
                )
                .build(Vec::with_capacity(plain.len() / 2))?;
            encoder.write_all(plain)?;
            let (out, result) = encoder.finish();
            result.map(|()| out)
        }
        4 => zstd::stream::encode_all(plain, level.unwrap_or(ZSTD_LEVEL)),
        other => Err(std::io::Error::other(format!("unknown codec {other}"))),
    }
}
