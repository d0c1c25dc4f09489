//! The codecs of a batch's records, in Kafka's framing for each: compressing at Kafka's default
//! levels (what a topic's `compression.type` re-encodes produced batches with, and what the log
//! cleaner re-encodes a compacted batch's surviving records with), and streaming decompression
//! whose callers cap the output (`walk` and `recompress`; snappy blocks are checked against the
//! cap before they are allocated). Stored batches, already bounded when they were produced, are
//! decompressed whole by kafka-protocol's codecs (`records`).

use std::io::{self, Read, Write};

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

const GZIP: u8 = 1;
const SNAPPY: u8 = 2;
const LZ4: u8 = 3;
const ZSTD: u8 = 4;

/// The Java client's snappy framing: magic, version and compatible version, then blocks.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = 16;

/// A reader of the decompressed records of a batch body in `codec` (0 none, 1 gzip, 2 snappy
/// in raw or the Java client's xerial framing, 3 lz4 frame, 4 zstd). It does not bound the
/// output; callers take at most what they allow.
pub fn decompressor(
    codec: u8,
    body: &[u8],
    max_block_bytes: u64,
) -> io::Result<Box<dyn Read + '_>> {
    Ok(match codec {
        0 => Box::new(body),
        GZIP => Box::new(flate2::read::GzDecoder::new(body)),
        SNAPPY => Box::new(SnappyReader::new(body, max_block_bytes)?),
        LZ4 => Box::new(lz4::Decoder::new(body)?),
        ZSTD => Box::new(zstd::stream::read::Decoder::new(body)?),
        other => {
            return Err(io::Error::other(format!(
                "unknown compression codec {other}"
            )))
        }
    })
}

/// Snappy in the Java client's xerial framing (or one raw block without it), decompressed a
/// block at a time; each block's announced size is checked before it is allocated.
struct SnappyReader<'a> {
    blocks: &'a [u8],
    raw: bool,
    current: Vec<u8>,
    at: usize,
    max_block_bytes: u64,
}

impl<'a> SnappyReader<'a> {
    fn new(body: &'a [u8], max_block_bytes: u64) -> io::Result<SnappyReader<'a>> {
        let framed = body.len() >= XERIAL_HEADER_BYTES && body[..8] == XERIAL_MAGIC;
        let blocks = if framed {
            &body[XERIAL_HEADER_BYTES..]
        } else {
            body
        };
        Ok(SnappyReader {
            blocks,
            raw: !framed,
            current: Vec::new(),
            at: 0,
            max_block_bytes,
        })
    }

    fn next_block(&mut self) -> io::Result<bool> {
        let compressed = if self.raw {
            std::mem::take(&mut self.blocks)
        } else {
            if self.blocks.len() < 4 {
                return Ok(false);
            }
            let length = u32::from_be_bytes([
                self.blocks[0],
                self.blocks[1],
                self.blocks[2],
                self.blocks[3],
            ]) as usize;
            let block = self
                .blocks
                .get(4..4 + length)
                .ok_or_else(|| io::Error::other("snappy block runs past the batch"))?;
            self.blocks = &self.blocks[4 + length..];
            block
        };
        if compressed.is_empty() {
            return Ok(false);
        }
        let size = snap::raw::decompress_len(compressed).map_err(io::Error::other)?;
        if size as u64 > self.max_block_bytes {
            return Err(io::Error::other(
                "snappy block larger than the decompression bound",
            ));
        }
        self.current = snap::raw::Decoder::new()
            .decompress_vec(compressed)
            .map_err(io::Error::other)?;
        self.at = 0;
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.current.len() - self.at);
        out[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
