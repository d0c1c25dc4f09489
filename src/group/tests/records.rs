//! `__consumer_offsets` record formats, checked byte for byte.

use crate::group::records::*;

#[test]
fn offset_commit_key_bytes() {
    let key = encode_offset_commit_key("g", "t", 3).unwrap();
    assert_eq!(key.as_ref(), &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
    let decoded = decode_key(&key).unwrap();
    assert_eq!(
        decoded,
        RecordKey::OffsetCommit {
            group_id: "g".into(),
            topic: "t".into(),
            partition: 3
        }
    );
}

#[test]
fn group_metadata_key_bytes() {
    let key = encode_group_metadata_key("grp").unwrap();
    assert_eq!(key.as_ref(), &[0, 2, 0, 3, b'g', b'r', b'p']);
    assert_eq!(
        decode_key(&key).unwrap(),
        RecordKey::GroupMetadata {
            group_id: "grp".into()
        }
    );
}

#[test]
fn offset_commit_value_v3_bytes() {
    let value = OffsetCommitValue {
        offset: 5,
        leader_epoch: 2,
        metadata: "m".into(),
        commit_timestamp_ms: 7,
        expire_timestamp_ms: None,
    };
    let bytes = encode_offset_commit_value(&value).unwrap();
    let expected: Vec<u8> = [
        &[0, 3][..],
        &5i64.to_be_bytes(),
        &2i32.to_be_bytes(),
        &[0, 1, b'm'],
        &7i64.to_be_bytes(),
    ]
    .concat();
    assert_eq!(bytes.as_ref(), expected.as_slice());
    assert_eq!(decode_offset_commit_value(&bytes).unwrap(), value);
}

#[test]
fn offset_commit_value_with_expiry_uses_version_1() {
    let value = OffsetCommitValue {
        offset: 9,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 100,
        expire_timestamp_ms: Some(200),
    };
    let bytes = encode_offset_commit_value(&value).unwrap();
    assert_eq!(&bytes[..2], &[0, 1]);
    assert_eq!(bytes.len(), 2 + 8 + 2 + 8 + 8);
    assert_eq!(decode_offset_commit_value(&bytes).unwrap(), value);
}

#[test]
fn older_and_flexible_value_versions_decode() {
    // Version 0: offset, metadata, timestamp.
    let v0: Vec<u8> = [
        &[0, 0][..],
        &11i64.to_be_bytes(),
        &[0, 0],
        &12i64.to_be_bytes(),
    ]
    .concat();
    let decoded = decode_offset_commit_value(&v0).unwrap();
    assert_eq!(
        (
            decoded.offset,
            decoded.leader_epoch,
            decoded.commit_timestamp_ms
        ),
        (11, -1, 12)
    );
    // Version 4 (flexible): compact metadata string and an empty tagged-field section.
    let v4: Vec<u8> = [
        &[0, 4][..],
        &13i64.to_be_bytes(),
        &3i32.to_be_bytes(),
        &[2, b'x'],
        &14i64.to_be_bytes(),
        &[0],
    ]
    .concat();
    let decoded = decode_offset_commit_value(&v4).unwrap();
    assert_eq!(
        (
            decoded.offset,
            decoded.leader_epoch,
            decoded.metadata.as_str()
        ),
        (13, 3, "x")
    );
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    assert!(decode_key(&[0]).is_err());
    assert!(decode_key(&[0, 1, 0, 9, b'g']).is_err());
    assert!(
        decode_key(&[0, 2, 0, 1, b'g', 0]).is_err(),
        "trailing bytes"
    );
    assert!(decode_offset_commit_value(&[0, 3, 0]).is_err());
    assert!(decode_offset_commit_value(&[0, 9]).is_err());
    assert_eq!(
        decode_key(&[0, 5, 1, 2, 3]).unwrap(),
        RecordKey::Other { record_type: 5 }
    );
    assert!(encode_group_metadata_key(&"x".repeat(40_000)).is_err());
}

#[test]
fn partition_for_a_group_matches_kafka() {
    // "hello".hashCode() in Java is 99162322.
    assert_eq!(offsets_partition_for("hello", 50), 99_162_322 % 50);
    assert_eq!(offsets_partition_for("", 50), 0);
    // A negative hash: "polygenelubricants".hashCode() is i32::MIN, which Kafka's abs maps to 0.
    assert_eq!(offsets_partition_for("polygenelubricants", 50), 0);
}
