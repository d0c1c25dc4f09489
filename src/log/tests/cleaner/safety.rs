//! What keeps a round safe: an interrupted swap completed on open, a group whose segments
//! changed meanwhile left out, a live producer's last batch kept, and a bad CRC stopping the
//! round with nothing changed.

use super::*;

/// The same batch from producer `producer_id` (epoch 0, base sequence 0).
fn from_producer(batch: Vec<u8>, producer_id: i64) -> Vec<u8> {
    let mut head = [0u8; RECORD_BATCH_OVERHEAD];
    head.copy_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
    head[43..51].copy_from_slice(&producer_id.to_be_bytes());
    head[51..53].copy_from_slice(&0i16.to_be_bytes());
    head[53..57].copy_from_slice(&0i32.to_be_bytes());
    with_records(&head, &batch[RECORD_BATCH_OVERHEAD..], 0)
}

#[test]
fn an_interrupted_swap_is_completed_on_open() {
    let config = small_config();
    let cleaned = tempfile::tempdir().unwrap();
    let mut log = rounds(cleaned.path(), &config);
    log.clean(0, &eager(), now_ms())
        .unwrap()
        .expect("a round ran");
    let expected = stored(&log);
    let first = *log.inactive.keys().next().unwrap();
    let second = log.inactive.keys().nth(1).copied();
    drop(log);

    // The same log, crashed after the first group's swap file was written: the swap replaces
    // the segments it covers, and a leftover `.cleaned` file is deleted.
    let crashed = tempfile::tempdir().unwrap();
    drop(rounds(crashed.path(), &config));
    let name = |base: i64, suffix: &str| format!("{base:020}{suffix}");
    std::fs::copy(
        cleaned.path().join(name(first, ".log")),
        crashed.path().join(name(first, ".log.swap")),
    )
    .unwrap();
    std::fs::write(crashed.path().join(name(7, ".log.cleaned")), b"partial").unwrap();
    let log = open(crashed.path(), &config, false, 0);
    let recovered = stored(&log);
    let covered_end = second.unwrap_or(log.active_segment_base_offset());
    let below = |records: &[Stored]| -> Vec<Stored> {
        records
            .iter()
            .filter(|(offset, _, _)| *offset < covered_end)
            .cloned()
            .collect()
    };
    assert_eq!(below(&recovered), below(&expected));
    assert_eq!(log.log_end_offset(), 150);
    assert!(!crashed.path().join(name(7, ".log.cleaned")).exists());
    assert!(!crashed.path().join(name(first, ".log.swap")).exists());
}

#[test]
fn a_group_whose_segments_changed_meanwhile_is_not_swapped_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = rounds(dir.path(), &small_config());
    let round = log
        .plan_cleaning(0, &eager(), HashSet::new(), i64::MAX, now_ms())
        .unwrap()
        .expect("due");
    let cleaned = round.write().unwrap().expect("written");
    let cleaned_files = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".cleaned")
            })
            .count()
    };
    assert!(
        cleaned_files(dir.path()) > 1,
        "the round wrote one file per group"
    );
    // Meanwhile DeleteRecords and retention remove the first segment.
    let second = *log.inactive.keys().nth(1).unwrap();
    log.advance_log_start_offset(second).unwrap();
    let retention = RetentionConfig {
        retention_ms: -1,
        retention_bytes: -1,
        file_delete_delay_ms: 0,
    };
    let end = log.log_end_offset();
    assert_eq!(log.delete_old_segments(&retention, end, 0).unwrap(), 1);
    let before = stored(&log);
    let outcome = log
        .finish_cleaning(cleaned, now_ms())
        .unwrap()
        .expect("the other groups were swapped in");
    assert_eq!(
        cleaned_files(dir.path()),
        0,
        "the first group's output is deleted"
    );
    assert_eq!(log.log_start_offset(), second);
    assert_compacted(&before, &stored(&log), outcome.next_dirty_offset);
}

#[test]
fn a_live_producers_last_batch_stays_when_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &small_config(), true, 0);
    let none = Compression::None;
    let produced = from_producer(keyed_batch(&[("k", Some("1"))], 1_000, none), 7);
    log.append(&produced, 0, 0, false).unwrap();
    log.append(&keyed_batch(&[("k", Some("2"))], 1_000, none), 0, 0, false)
        .unwrap();
    log.append(&keyed_batch(&[("j", Some("3"))], 1_000, none), 0, 0, false)
        .unwrap();
    log.roll(0).unwrap();
    let round = log
        .plan_cleaning(0, &eager(), HashSet::from([0]), i64::MAX, now_ms())
        .unwrap()
        .expect("due");
    let cleaned = round.write().unwrap().expect("written");
    log.finish_cleaning(cleaned, now_ms())
        .unwrap()
        .expect("swapped in");
    let kept: Vec<(i64, i64, i32)> = headers(&log)
        .iter()
        .map(|h| (h.base_offset, h.producer_id, h.records_count))
        .collect();
    assert_eq!(kept, vec![(0, 7, 0), (1, -1, 1), (2, -1, 1)]);
}

#[test]
fn a_source_batch_with_a_bad_crc_stops_the_round_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = rounds(dir.path(), &small_config());
    let first = dir.path().join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&first).unwrap();
    // The last byte of the first batch's last value: a CRC mismatch, still decodable.
    let first_batch = BatchHeader::parse(&bytes).unwrap().total_size();
    bytes[first_batch - 1] ^= 0x01;
    std::fs::write(&first, &bytes).unwrap();
    let segments = log.inactive.len();
    let error = log.clean(0, &eager(), now_ms()).unwrap_err();
    assert!(error.to_string().contains("CRC"), "{error}");
    assert_eq!(log.inactive.len(), segments);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        bytes,
        "the segment is untouched"
    );
    let leftovers = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".log.")
        })
        .count();
    assert_eq!(leftovers, 0, "no .cleaned or .swap file is left behind");
}
