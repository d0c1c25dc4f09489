//! The primitive encodings of Kafka's flexible versions, for the messages `newer_versions`
//! reads and writes itself (kafka-protocol keeps its own private): unsigned varints, compact
//! (nullable) strings, compact array lengths, UUIDs and tagged-field sections. Every length read
//! from a request is checked against the bytes that are left before anything is allocated.

use anyhow::{bail, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// An unsigned varint of at most 5 bytes (a u32), as flexible versions write lengths.
pub fn get_uvarint(body: &mut Bytes) -> Result<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !body.has_remaining() {
            bail!("varint cut short");
        }
        let byte = body.get_u8();
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint longer than 5 bytes")
}

/// A compact nullable string: length + 1 as a varint (0: null), then UTF-8 bytes, sliced out
/// of the frame without copying once the length is known to fit.
pub fn get_compact_string(body: &mut Bytes) -> Result<Option<StrBytes>> {
    let len = match get_uvarint(body)? {
        0 => return Ok(None),
        n => (n - 1) as usize,
    };
    if len > body.remaining() {
        bail!("string of {len} bytes, {} left", body.remaining());
    }
    Ok(Some(StrBytes::from_utf8(body.split_to(len))?))
}

/// A compact string that may not be null.
pub fn get_string(body: &mut Bytes, field: &str) -> Result<StrBytes> {
    match get_compact_string(body)? {
        Some(s) => Ok(s),
        None => bail!("{field} is null"),
    }
}

/// A compact array's element count (None: a null array). Each element takes at least
/// `min_element_bytes`, so a count the remaining bytes cannot hold is refused before any
/// vector is sized by it.
pub fn get_array_len(body: &mut Bytes, min_element_bytes: usize) -> Result<Option<usize>> {
    let len = match get_uvarint(body)? {
        0 => return Ok(None),
        n => (n - 1) as usize,
    };
    if len.saturating_mul(min_element_bytes) > body.remaining() {
        bail!("array of {len} elements in {} bytes", body.remaining());
    }
    Ok(Some(len))
}

pub fn get_i8(body: &mut Bytes) -> Result<i8> {
    fixed(body, 1)?;
    Ok(body.get_i8())
}

pub fn get_i16(body: &mut Bytes) -> Result<i16> {
    fixed(body, 2)?;
    Ok(body.get_i16())
}

pub fn get_i32(body: &mut Bytes) -> Result<i32> {
    fixed(body, 4)?;
    Ok(body.get_i32())
}

pub fn get_i64(body: &mut Bytes) -> Result<i64> {
    fixed(body, 8)?;
    Ok(body.get_i64())
}

pub fn get_bool(body: &mut Bytes) -> Result<bool> {
    fixed(body, 1)?;
    Ok(body.get_u8() != 0)
}

pub fn get_uuid(body: &mut Bytes) -> Result<Uuid> {
    fixed(body, 16)?;
    Ok(Uuid::from_u128(body.get_u128()))
}

fn fixed(body: &Bytes, size: usize) -> Result<()> {
    if body.remaining() < size {
        bail!("{size} bytes wanted, {} left", body.remaining());
    }
    Ok(())
}

/// Skips a tagged-field section: none of the versions read here defines a tagged field.
pub fn skip_tagged_fields(body: &mut Bytes) -> Result<()> {
    let count = get_uvarint(body)?;
    for _ in 0..count {
        let _tag = get_uvarint(body)?;
        let size = get_uvarint(body)? as usize;
        if size > body.remaining() {
            bail!("tagged field of {size} bytes, {} left", body.remaining());
        }
        body.advance(size);
    }
    Ok(())
}

pub fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

pub fn put_compact_string(buf: &mut BytesMut, value: Option<&str>) -> Result<()> {
    match value {
        None => put_uvarint(buf, 0),
        Some(s) => {
            put_array_len(buf, s.len())?;
            buf.put_slice(s.as_bytes());
        }
    }
    Ok(())
}

/// A compact array's (or string's) length: the count + 1.
pub fn put_array_len(buf: &mut BytesMut, len: usize) -> Result<()> {
    put_uvarint(buf, u32::try_from(len + 1)?);
    Ok(())
}

/// An empty tagged-field section: the responses written here carry none.
pub fn put_no_tagged_fields(buf: &mut BytesMut) {
    buf.put_u8(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_compact_strings_round_trip_and_are_bounded() {
        for value in [0u32, 1, 127, 128, 300, 16_384, u32::MAX] {
            let mut buf = BytesMut::new();
            put_uvarint(&mut buf, value);
            assert_eq!(get_uvarint(&mut buf.freeze()).unwrap(), value);
        }
        assert!(get_uvarint(&mut Bytes::from_static(&[0x80, 0x80])).is_err());
        assert!(get_uvarint(&mut Bytes::from_static(&[0xff; 6])).is_err());
        let mut buf = BytesMut::new();
        put_compact_string(&mut buf, Some("héllo")).unwrap();
        put_compact_string(&mut buf, None).unwrap();
        let mut bytes = buf.freeze();
        assert_eq!(
            get_compact_string(&mut bytes).unwrap().unwrap().as_str(),
            "héllo"
        );
        assert_eq!(get_compact_string(&mut bytes).unwrap(), None);
        // A length past the end, and bytes that are not UTF-8.
        assert!(get_compact_string(&mut Bytes::from_static(&[0xff, 0xff, 0x03, b'a'])).is_err());
        assert!(get_compact_string(&mut Bytes::from_static(&[3, 0xff, 0xfe])).is_err());
    }

    #[test]
    fn array_counts_are_bounded_by_the_bytes_left() {
        // 2^28 elements announced in 4 bytes: refused, nothing allocated.
        let mut huge = Bytes::from_static(&[0x80, 0x80, 0x80, 0x01, 0, 0, 0, 0]);
        assert!(get_array_len(&mut huge, 4).is_err());
        let mut two = Bytes::from_static(&[3, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(get_array_len(&mut two, 4).unwrap(), Some(2));
        assert_eq!(
            get_array_len(&mut Bytes::from_static(&[0]), 4).unwrap(),
            None
        );
        assert!(get_uuid(&mut Bytes::from_static(&[1; 15])).is_err());
        assert!(get_i64(&mut Bytes::from_static(&[1; 7])).is_err());
    }
}
