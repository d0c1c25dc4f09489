//! Request decoding and response framing over kafka-protocol, from `Bytes` so that record
//! batches stay zero-copy slices of the request frame.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::newer_versions::{self, NewerFields};
use super::versions::VersionTable;

/// A request whose header decoded and whose version the broker's `VersionTable` serves.
#[derive(Debug)]
pub struct DecodedRequest {
    pub header: RequestHeader,
    pub api_key: ApiKey,
    pub body: RequestKind,
    /// The fields of a version newer than kafka-protocol's, decoded in-tree (`newer_versions`).
    pub newer: NewerFields,
}

/// Why a frame could not become a request. Each is answered the way Kafka answers it.
#[derive(Debug)]
pub enum DecodeError {
    /// Unknown key, malformed header: Kafka closes the connection.
    Header(String),
    /// ApiVersions at a version above ours: answer the v0 error response (KIP-511).
    ApiVersionsUnsupported { correlation_id: i32 },
    /// Any other API at a version we do not serve: Kafka closes the connection. `emulating`
    /// names the Kafka release the table is narrowed to, if any, for the log.
    UnsupportedVersion {
        api_key: i16,
        api_version: i16,
        emulating: Option<&'static str>,
    },
    /// The header was fine but the body was not: close, as Kafka does for an unparsable request.
    Body {
        api_key: i16,
        api_version: i16,
        reason: String,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Header(r) => write!(f, "bad request header: {r}"),
            DecodeError::ApiVersionsUnsupported { .. } => {
                write!(f, "unsupported ApiVersions version")
            }
            DecodeError::UnsupportedVersion {
                api_key,
                api_version,
                emulating,
            } => {
                write!(f, "unsupported api key {api_key} version {api_version}")?;
                match emulating {
                    Some(release) => {
                        write!(
                            f,
                            " ({})",
                            super::emulation::release_note(*api_key, release)
                        )
                    }
                    None => Ok(()),
                }
            }
            DecodeError::Body {
                api_key,
                api_version,
                reason,
            } => {
                write!(f, "bad body for api key {api_key} v{api_version}: {reason}")
            }
        }
    }
}

/// Smallest possible request header: api key, api version, correlation id, client id length.
const MIN_HEADER_BYTES: usize = 10;

/// Decodes one frame (without its length prefix), refusing what `versions` does not serve.
pub fn decode_request(
    mut frame: Bytes,
    versions: &VersionTable,
) -> Result<DecodedRequest, DecodeError> {
    if frame.len() < MIN_HEADER_BYTES {
        return Err(DecodeError::Header(format!(
            "frame of {} bytes",
            frame.len()
        )));
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let key = ApiKey::try_from(api_key)
        .map_err(|_| DecodeError::Header(format!("unknown api key {api_key}")))?;
    let Some((min, max)) = versions.served_range(api_key) else {
        return Err(DecodeError::UnsupportedVersion {
            api_key,
            api_version,
            emulating: versions.emulated_release(),
        });
    };
    if key == ApiKey::ApiVersions && api_version > max {
        return Err(DecodeError::ApiVersionsUnsupported { correlation_id });
    }
    if api_version < min || api_version > max {
        return Err(DecodeError::UnsupportedVersion {
            api_key,
            api_version,
            emulating: versions.emulated_release(),
        });
    }
    let header_version = key.request_header_version(api_version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| DecodeError::Header(e.to_string()))?;
    let (body, newer) = newer_versions::decode_body(key, &mut frame, api_version).map_err(|e| {
        DecodeError::Body {
            api_key,
            api_version,
            reason: e.to_string(),
        }
    })?;
    Ok(DecodedRequest {
        header,
        api_key: key,
        body,
        newer,
    })
}

/// Frames a response: i32 length, the response header at the version the API requires, body.
pub fn encode_response<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    api_version: i16,
    body: &R,
) -> anyhow::Result<Bytes> {
    let header_version = R::header_version(api_version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let size = header.compute_size(header_version)? + body.compute_size(api_version)?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(i32::try_from(size)?);
    header.encode(&mut buf, header_version)?;
    body.encode(&mut buf, api_version)?;
    debug_assert_eq!(buf.len(), 4 + size);
    Ok(buf.freeze())
}

/// `encode_response` for a response held as a `ResponseKind` (which has no size computation):
/// the body is encoded behind a placeholder length that is filled in afterwards. A version
/// kafka-protocol does not know is encoded at the layout `newer_versions` gives it.
pub fn encode_response_kind(
    correlation_id: i32,
    api_version: i16,
    body: &ResponseKind,
) -> anyhow::Result<Bytes> {
    let (codec_version, in_tree) = newer_versions::response_layout(body, api_version);
    let header_version = body.header_version(codec_version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    header.encode(&mut buf, header_version)?;
    match in_tree {
        Some(encode) => encode(body, &mut buf)?,
        None => body.encode(&mut buf, codec_version)?,
    }
    let size = i32::try_from(buf.len() - 4)?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// The ApiVersions v0 answer to a version we do not serve (KIP-511): header v0, error 35
/// (UNSUPPORTED_VERSION), and only the ApiVersions entry of `versions`, so the client can retry
/// at its max.
pub fn api_versions_fallback(correlation_id: i32, versions: &VersionTable) -> Bytes {
    let (min, max) = versions
        .served_range(ApiKey::ApiVersions as i16)
        .unwrap_or((0, 0));
    let mut buf = BytesMut::with_capacity(4 + 16);
    buf.put_i32(16);
    buf.put_i32(correlation_id);
    buf.put_i16(35);
    buf.put_i32(1);
    buf.put_i16(ApiKey::ApiVersions as i16);
    buf.put_i16(min);
    buf.put_i16(max);
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_unknown_frames_are_header_errors() {
        assert!(matches!(
            decode_request(Bytes::from_static(&[0, 18]), &VersionTable::sluice()),
            Err(DecodeError::Header(_))
        ));
        let unknown = Bytes::from_static(&[0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff]);
        assert!(matches!(
            decode_request(unknown, &VersionTable::sluice()),
            Err(DecodeError::Header(_))
        ));
    }

    #[test]
    fn api_versions_above_max_gets_fallback() {
        let frame = Bytes::from_static(&[0, 18, 0, 99, 0, 0, 0, 7, 0xff, 0xff]);
        match decode_request(frame, &VersionTable::sluice()) {
            Err(DecodeError::ApiVersionsUnsupported { correlation_id }) => {
                assert_eq!(correlation_id, 7)
            }
            other => panic!("{other:?}"),
        }
        let resp = api_versions_fallback(7, &VersionTable::sluice());
        assert_eq!(
            &resp[..],
            &[0, 0, 0, 16, 0, 0, 0, 7, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 5]
        );
    }

    #[test]
    fn produce_v2_is_unsupported() {
        let frame = Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 1, 0xff, 0xff]);
        assert!(matches!(
            decode_request(frame, &VersionTable::sluice()),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
    }

    #[test]
    fn an_emulated_release_narrows_what_is_decoded() {
        let kafka_3_6 = VersionTable::emulating("3.6").unwrap();
        // ApiVersions v4 (3.9 on) gets the fallback, which offers 3.6's 0-3.
        let frame = Bytes::from_static(&[0, 18, 0, 4, 0, 0, 0, 9, 0xff, 0xff]);
        assert!(matches!(
            decode_request(frame, &kafka_3_6),
            Err(DecodeError::ApiVersionsUnsupported { correlation_id: 9 })
        ));
        let resp = api_versions_fallback(9, &kafka_3_6);
        assert_eq!(&resp[16..], &[0, 0, 0, 3]);
        // Produce v10 (3.7 on) is refused like any unserved version.
        let frame = Bytes::from_static(&[0, 0, 0, 10, 0, 0, 0, 1, 0xff, 0xff]);
        assert!(matches!(
            decode_request(frame, &kafka_3_6),
            Err(DecodeError::UnsupportedVersion {
                api_key: 0,
                api_version: 10,
                emulating: Some("3.6"),
            })
        ));
    }
}
