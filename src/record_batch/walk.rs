//! Walks the records of one produced batch without keeping them: decompression streams through
//! a fixed buffer, every length is checked against the bytes that remain, and at most
//! `max_decompressed_bytes` are ever decompressed, so neither a lying record count nor a
//! decompression bomb can cost more than that bound in CPU or any memory at all.
//!
//! Uncompressed batches, the common case, are walked in place: varints are decoded and keys and
//! values skipped by moving an index over the request's own bytes.
//!
//! This is the record iteration Kafka's `LogValidator` runs after its batch-header checks
//! (`record_batch/validate.rs` makes those first): exactly `records_count` well-formed records
//! and nothing left over.

use std::io::{self, BufRead, BufReader, Read};

use super::decompress::decompressor;

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
        _ => decompressor(codec, body, max_decompressed_bytes).map_err(corrupt)?,
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

#[cfg(test)]
mod tests {
    use super::super::encode::{self, PlainRecord};
    use super::*;
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
