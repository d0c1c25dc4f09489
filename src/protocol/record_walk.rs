//! Walks the records of one produced batch without keeping them: decompression streams through
//! a fixed buffer, every length is checked against the bytes that remain, and at most
//! `max_decompressed_bytes` are ever decompressed, so neither a lying record count nor a
//! decompression bomb can cost more than that bound in CPU or any memory at all.
//!
//! Uncompressed batches, the common case, are walked in place: varints are decoded and keys and
//! values skipped by moving an index over the request's own bytes.
//!
//! This is the record iteration Kafka's `LogValidator` runs after its batch-header checks
//! (`api/produce_validation.rs` makes those first): exactly `records_count` well-formed records
//! and nothing left over.

use std::io::{self, BufRead, BufReader, Read};

/// Why the records of a batch are not acceptable.
#[derive(Debug, PartialEq, Eq)]
pub enum WalkError {
    /// Malformed structure, truncated data, or a codec error (Kafka: CORRUPT_MESSAGE).
    Corrupt(String),
    /// Well-formed but inconsistent with the header: wrong count, leftovers (INVALID_RECORD).
    Invalid(String),
    /// More than the decompression bound.
    TooLarge,
}

const GZIP: u8 = 1;
const SNAPPY: u8 = 2;
const LZ4: u8 = 3;
const ZSTD: u8 = 4;

/// The Java client's snappy framing: magic, version and compatible version, then blocks.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = 16;

/// Calls `visit(offset_delta, timestamp_delta, has_key)` for each of `records_count` records of
/// `body` (the batch after its 61-byte header), decompressing with `codec`. `has_key` is false
/// for a null key only; an empty key is a key. Uncompressed records are walked in place over the
/// slice; compressed ones through a streaming decoder.
pub fn walk_records(
    codec: u8,
    body: &[u8],
    records_count: i32,
    max_decompressed_bytes: u64,
    visit: impl FnMut(i32, i64, bool) -> Result<(), WalkError>,
) -> Result<(), WalkError> {
    // One byte past the bound tells "exactly at the bound" from "over it".
    let reader: Box<dyn Read + '_> = match codec {
        0 => {
            let visible = usize::try_from(max_decompressed_bytes.saturating_add(1))
                .map_or(body, |max| &body[..body.len().min(max)]);
            let input = SliceInput {
                bytes: visible,
                at: 0,
                limit: max_decompressed_bytes,
            };
            return walk(input, records_count, max_decompressed_bytes, visit);
        }
        _ => decompressor(codec, body, max_decompressed_bytes)?,
    };
    let input = Counted {
        inner: BufReader::new(reader.take(max_decompressed_bytes + 1)),
        read: 0,
        limit: max_decompressed_bytes,
    };
    walk(input, records_count, max_decompressed_bytes, visit)
}

/// The record walk proper, over decompressed bytes.
fn walk(
    mut input: impl Input,
    records_count: i32,
    max_decompressed_bytes: u64,
    mut visit: impl FnMut(i32, i64, bool) -> Result<(), WalkError>,
) -> Result<(), WalkError> {
    for expected in 0..records_count.max(0) {
        let length = read_varint(&mut input)?;
        let length = u64::try_from(length)
            .map_err(|_| WalkError::Corrupt("negative record length".into()))?;
        let start = input.read();
        input.byte()?; // attributes, unused
        let timestamp_delta = read_varint(&mut input)?;
        let offset_delta = i32::try_from(read_varint(&mut input)?)
            .map_err(|_| invalid("offset delta out of range"))?;
        if offset_delta != expected {
            return Err(invalid("record offset deltas are not consecutive"));
        }
        let has_key = skip_sized(&mut input)?;
        skip_sized(&mut input)?; // value
        let headers = read_varint(&mut input)?;
        if headers < 0 {
            return Err(WalkError::Corrupt("negative header count".into()));
        }
        for _ in 0..headers {
            skip_sized(&mut input)?; // header key
            skip_sized(&mut input)?; // header value
            if input.read() - start > length {
                break;
            }
        }
        if input.read() - start != length {
            return Err(WalkError::Corrupt(
                "record fields do not add up to its length".into(),
            ));
        }
        visit(offset_delta, timestamp_delta, has_key)?;
        if input.read() > max_decompressed_bytes {
            return Err(WalkError::TooLarge);
        }
    }
    match input.byte() {
        Err(WalkError::Corrupt(_)) => Ok(()),
        Err(other) => Err(other),
        Ok(_) if input.read() > max_decompressed_bytes => Err(WalkError::TooLarge),
        Ok(_) => Err(invalid("bytes left over after the batch's records")),
    }
}

/// A reader of the decompressed records of a batch body in `codec` (0 none, 1 gzip, 2 snappy
/// in raw or the Java client's xerial framing, 3 lz4 frame, 4 zstd). It does not bound the
/// output; callers take at most what they allow.
pub fn decompressor(
    codec: u8,
    body: &[u8],
    max_block_bytes: u64,
) -> Result<Box<dyn Read + '_>, WalkError> {
    Ok(match codec {
        0 => Box::new(body),
        GZIP => Box::new(flate2::read::GzDecoder::new(body)),
        SNAPPY => Box::new(SnappyReader::new(body, max_block_bytes)?),
        LZ4 => Box::new(lz4::Decoder::new(body).map_err(corrupt)?),
        ZSTD => Box::new(zstd::stream::read::Decoder::new(body).map_err(corrupt)?),
        other => {
            return Err(WalkError::Corrupt(format!(
                "unknown compression codec {other}"
            )))
        }
    })
}

fn corrupt(e: io::Error) -> WalkError {
    WalkError::Corrupt(e.to_string())
}

fn invalid(message: &str) -> WalkError {
    WalkError::Invalid(message.to_string())
}

/// Decompressed record bytes, read forwards. Running dry past `limit` means the bound cut the
/// data short, not that the data was short.
trait Input {
    fn byte(&mut self) -> Result<u8, WalkError>;
    fn skip(&mut self, count: u64) -> Result<(), WalkError>;
    /// Bytes taken so far.
    fn read(&self) -> u64;
}

fn ran_dry(read: u64, limit: u64) -> WalkError {
    if read > limit {
        WalkError::TooLarge
    } else {
        WalkError::Corrupt("records end early".into())
    }
}

/// Uncompressed records: an index into the batch's own bytes, nothing copied.
struct SliceInput<'a> {
    /// The body, cut one byte past the bound.
    bytes: &'a [u8],
    at: usize,
    limit: u64,
}

impl Input for SliceInput<'_> {
    #[inline]
    fn byte(&mut self) -> Result<u8, WalkError> {
        match self.bytes.get(self.at) {
            Some(&byte) => {
                self.at += 1;
                Ok(byte)
            }
            None => Err(ran_dry(self.read(), self.limit)),
        }
    }

    fn skip(&mut self, count: u64) -> Result<(), WalkError> {
        let left = self.bytes.len() - self.at;
        match usize::try_from(count) {
            Ok(count) if count <= left => {
                self.at += count;
                Ok(())
            }
            _ => {
                self.at = self.bytes.len();
                Err(ran_dry(self.read(), self.limit))
            }
        }
    }

    fn read(&self) -> u64 {
        self.at as u64
    }
}

/// Compressed records: a buffered decoder, skipped through its buffer without copying.
struct Counted<R> {
    inner: BufReader<R>,
    read: u64,
    limit: u64,
}

impl<R: Read> Input for Counted<R> {
    fn byte(&mut self) -> Result<u8, WalkError> {
        if let Some(&byte) = self.inner.buffer().first() {
            self.inner.consume(1);
            self.read += 1;
            return Ok(byte);
        }
        let mut one = [0u8; 1];
        match self.inner.read_exact(&mut one) {
            Ok(()) => {
                self.read += 1;
                Ok(one[0])
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(ran_dry(self.read, self.limit))
            }
            Err(e) => Err(corrupt(e)),
        }
    }

    fn skip(&mut self, mut count: u64) -> Result<(), WalkError> {
        while count > 0 {
            let available = self.inner.fill_buf().map_err(corrupt)?.len();
            if available == 0 {
                return Err(ran_dry(self.read, self.limit));
            }
            let step = available.min(usize::try_from(count).unwrap_or(usize::MAX));
            self.inner.consume(step);
            self.read += step as u64;
            count -= step as u64;
        }
        Ok(())
    }

    fn read(&self) -> u64 {
        self.read
    }
}

/// A zig-zag varint or varlong.
#[inline]
fn read_varint(input: &mut impl Input) -> Result<i64, WalkError> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = input.byte()?;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err(WalkError::Corrupt("varint longer than 10 bytes".into()))
}

/// Skips one length-prefixed field; false when it is null (length -1).
fn skip_sized(input: &mut impl Input) -> Result<bool, WalkError> {
    match read_varint(input)? {
        -1 => Ok(false),
        n if n < 0 => Err(WalkError::Corrupt("negative field length".into())),
        n => input.skip(n as u64).map(|()| true),
    }
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
    fn new(body: &'a [u8], max_block_bytes: u64) -> Result<SnappyReader<'a>, WalkError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::encode::{self, PlainRecord};
    use bytes::Bytes;
    use kafka_protocol::records::Compression;

    fn batch(count: usize, compression: Compression, value_bytes: usize) -> Bytes {
        let records = (0..count).map(|i| PlainRecord {
            key: (i % 2 == 0).then(|| Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(vec![b'v'; value_bytes])),
            timestamp_ms: 1000 + i as i64,
            headers: [
                ("h".into(), Some(Bytes::from_static(b"x"))),
                ("n".into(), None),
            ]
            .into_iter()
            .collect(),
        });
        encode::batch(records, compression).unwrap()
    }

    fn walk(batch: &[u8], count: i32, max: u64) -> Result<Vec<(i32, i64)>, WalkError> {
        let mut seen = Vec::new();
        walk_records(
            batch[21 + 1] & 0x07,
            &batch[61..],
            count,
            max,
            |o, t, has_key| {
                // batch() gives even records a key and odd ones a null key.
                assert_eq!(has_key, o % 2 == 0, "record {o}");
                seen.push((o, t));
                Ok(())
            },
        )?;
        Ok(seen)
    }

    #[test]
    fn every_codec_walks_every_record() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let b = batch(50, codec, 100);
            let seen = walk(&b, 50, 1 << 20).unwrap_or_else(|e| panic!("{codec:?}: {e:?}"));
            assert_eq!(seen.len(), 50, "{codec:?}");
            assert_eq!(seen[49], (49, 49));
        }
    }

    #[test]
    fn lying_counts_and_bombs_are_refused() {
        for codec in [Compression::None, Compression::Zstd] {
            let b = batch(10, codec, 10);
            assert!(
                matches!(walk(&b, i32::MAX, 1 << 20), Err(WalkError::Corrupt(_))),
                "{codec:?} too many"
            );
            assert!(
                matches!(walk(&b, 9, 1 << 20), Err(WalkError::Invalid(_))),
                "{codec:?} leftovers"
            );
        }
        let plain = batch(100, Compression::None, 1_000);
        assert_eq!(walk(&plain, 100, 10_000), Err(WalkError::TooLarge));
        let bomb = batch(100, Compression::Zstd, 100_000);
        assert_eq!(walk(&bomb, 100, 1 << 20), Err(WalkError::TooLarge));
        assert!(walk(&bomb, 100, 64 << 20).is_ok());
        let mut garbage = batch(10, Compression::Lz4, 10).to_vec();
        let len = garbage.len();
        garbage[len - 8..].fill(0xff);
        assert!(walk(&garbage, 10, 1 << 20).is_err());
    }
}
