//! Streaming decompression of a batch's records, for readers that cap what they take: the
//! produce path's record walk (`walk.rs`) and recompression (`recompress.rs`). Nothing is
//! decompressed ahead of the reader, and a snappy block's announced size is checked against the
//! cap before the block is allocated. Stored batches, bounded when they were produced, are
//! decompressed whole by kafka-protocol's codecs (`records.rs`).

use std::io::{self, Read};

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
