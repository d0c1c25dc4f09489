//! Tombstones: kept through their first cleaning under a KIP-534 delete horizon, with every
//! record's timestamp intact, dropped once the horizon has passed, and never dropped past the
//! end of the round's key map.

use super::*;

/// A batch of `records` with a delete horizon (KIP-534) of `horizon_ms` already stamped.
fn with_horizon(batch: Vec<u8>, horizon_ms: i64) -> Vec<u8> {
    let mut head = [0u8; RECORD_BATCH_OVERHEAD];
    head.copy_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
    set_delete_horizon(&mut head, horizon_ms);
    with_records(&head, &batch[RECORD_BATCH_OVERHEAD..], 0)
}

#[test]
fn tombstones_stay_for_delete_retention_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &small_config(), true, 0);
    for round in 0..20 {
        let value = format!("v{round}");
        let last = round == 19;
        let batch = keyed_batch(
            &[
                ("gone", if last { None } else { Some(&value) }),
                ("kept", Some(&value)),
            ],
            1_000,
            Compression::Zstd,
        );
        log.append(&batch, 0, 0, false).unwrap();
        // Roll so the tombstone's batch lies below the active segment.
        if last {
            log.roll(0).unwrap();
        }
    }
    let keep = CleanerConfig {
        delete_retention_ms: 3_600_000,
        ..eager()
    };
    log.clean(0, &keep, now_ms()).unwrap().expect("a round ran");
    let after = stored(&log);
    assert_eq!(
        after,
        vec![
            (38, Some(Bytes::from("gone")), None),
            (39, Some(Bytes::from("kept")), Some(Bytes::from("v19")))
        ]
    );
    // An hour and a second later the horizon the first cleaning stamped has passed.
    let outcome = log
        .clean(0, &keep, now_ms() + 3_601_000)
        .unwrap()
        .expect("a round ran");
    assert_eq!(outcome.records_removed, 1);
    assert_eq!(
        stored(&log),
        vec![(39, Some(Bytes::from("kept")), Some(Bytes::from("v19")))]
    );
    assert_eq!(log.log_end_offset(), 40);
}

#[test]
fn a_tombstone_gets_a_delete_horizon_on_its_first_cleaning_and_keeps_its_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &small_config(), true, 0);
    let none = Compression::None;
    log.append(&keyed_batch(&[("k", Some("v"))], 1_000, none), 0, 0, false)
        .unwrap();
    log.roll(0).unwrap();
    // Timestamps 2_000 in a batch that also holds a kept value.
    log.append(
        &keyed_batch(&[("k", None), ("j", Some("w"))], 2_000, Compression::Lz4),
        0,
        0,
        false,
    )
    .unwrap();
    log.roll(0).unwrap();
    let retention = CleanerConfig {
        delete_retention_ms: 0,
        ..eager()
    };
    // Even with delete.retention.ms=0 the first cleaning keeps the tombstone and stamps it.
    let now = now_ms();
    log.clean(0, &retention, now).unwrap().expect("a round ran");
    let tombstone_batch = headers(&log)
        .into_iter()
        .find(|h| h.base_offset == 1)
        .unwrap();
    assert_eq!(tombstone_batch.delete_horizon_ms(), Some(now));
    let read = log.read(1, 1 << 20, true, i64::MAX).unwrap();
    let mut bytes = read.records.clone();
    let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
    let times: Vec<(i64, i64)> = set
        .records
        .iter()
        .map(|r| (r.offset, r.timestamp))
        .collect();
    assert_eq!(
        times,
        vec![(1, 2_000), (2, 2_000)],
        "timestamps survive the horizon"
    );
    assert_eq!(
        stored(&log),
        vec![
            (1, Some(Bytes::from("k")), None),
            (2, Some(Bytes::from("j")), Some(Bytes::from("w")))
        ]
    );
    // Once the horizon has passed, the next cleaning drops it.
    let outcome = log
        .clean(0, &retention, now + 1)
        .unwrap()
        .expect("a round ran");
    assert_eq!(outcome.records_removed, 1);
    assert_eq!(
        stored(&log),
        vec![(2, Some(Bytes::from("j")), Some(Bytes::from("w")))]
    );
}

#[test]
fn records_past_the_key_map_stay_even_expired_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &small_config(), true, 0);
    let none = Compression::None;
    log.append(
        &keyed_batch(&[("k", Some("v")), ("a", Some("1"))], 1_000, none),
        0,
        0,
        false,
    )
    .unwrap();
    log.roll(0).unwrap();
    let expired = with_horizon(keyed_batch(&[("k", None)], 1_000, none), 1);
    log.append(&expired, 0, 0, false).unwrap();
    log.roll(0).unwrap();
    // The map holds the first batch only: the tombstone lies past its end.
    let tiny = CleanerConfig {
        dedupe_buffer_bytes: 1,
        ..eager()
    };
    let outcome = log.clean(0, &tiny, now_ms()).unwrap().expect("a round ran");
    assert_eq!(outcome.next_dirty_offset, 2);
    assert_eq!(
        stored(&log),
        vec![
            (0, Some(Bytes::from("k")), Some(Bytes::from("v"))),
            (1, Some(Bytes::from("a")), Some(Bytes::from("1"))),
            (2, Some(Bytes::from("k")), None)
        ],
        "the delete of k must not be lost while its value stays"
    );
}
