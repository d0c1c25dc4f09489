//! Entry points for the fuzz targets in `fuzz/` and for `tests/fuzz_corpus.rs`, which replays
//! their checked-in corpus and every crash regression on stable Rust. Not an API: each function
//! takes arbitrary bytes, drives them through the same code the broker runs on that input, and
//! returns normally whatever the bytes are. A panic, an abort, a hang or an unbounded allocation
//! inside one of them is a broker bug (bad input must get Kafka's answer: an error code or a
//! closed connection).
//!
//! ```text
//! request_frame      a request frame after its size prefix → protocol::codec::decode_request
//! record_batch       Produce's checks (validate, recompression) and the stored-batch readers
//! segment_recovery   a partition directory of one segment (.log, .index, .timeindex) → PartitionLog::open, read
//! consumer_offsets   __consumer_offsets records → the group coordinator's start-up replay
//! transaction_state  __transaction_state records → the transaction coordinator's start-up replay
//! ```
//!
//! The coordinator targets read their input as a list of records (`records`): each is a kind
//! byte, an i16 key length and the key, an i16 value length (-1: a tombstone) and the value.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::config::Config;
use crate::disk::Disk;
use crate::group::{GroupConfig, GroupCoordinator, OffsetStore, StoreError, StoredRecord};
use crate::log::{LogConfig, OpenOptions, PartitionLog};
use crate::protocol::{decode_request, VersionTable};
use crate::record_batch::header::{self, BatchHeader, BatchIter, RECORD_BATCH_OVERHEAD};
use crate::record_batch::recompress::{to_topic_codec, Recompression};
use crate::record_batch::validate::{validate, BatchLimits};
use crate::record_batch::{control, records};
use crate::time::Clock;
use crate::txn::{MarkerOutcome, MarkerSink, TransactionCoordinator, TxnConfig, TxnLogStore};

/// Kafka's default `max.message.bytes` (1 MiB plus the log overhead).
const MAX_MESSAGE_BYTES: i32 = 1_048_588;
/// A fixed "now" so that a run is reproducible.
const NOW_MS: i64 = 1_700_000_000_000;

/// A request frame (what follows the i32 size on the wire), decoded as a connection decodes it.
pub fn request_frame(data: &[u8]) {
    let versions = VersionTable::sluice();
    let _ = decode_request(Bytes::copy_from_slice(data), &versions);
}

/// One partition's records of a Produce request. They are validated as Produce does it (framing,
/// header, CRC, the record walk with bounded decompression), then again with the base offset
/// set to 0 and the CRC made right, so that the fuzzer reaches the record walk without having
/// to find CRCs. A batch that passes is re-encoded into every codec (a topic's
/// `compression.type`) and read with the readers of stored batches (`records_of`,
/// `for_each_record`, `parse_marker`, `find_record`); the bytes are also walked as a segment's
/// contents (`BatchIter`).
pub fn record_batch(data: &[u8]) {
    let _ = validate(data, &limits(false));
    for (_, batch_header) in BatchIter::new(data).flatten() {
        let _ = batch_header.last_offset();
    }
    if data.len() < RECORD_BATCH_OVERHEAD {
        return;
    }
    let mut fixed = data.to_vec();
    fixed[..8].copy_from_slice(&0i64.to_be_bytes());
    let batch_length = i32::from_be_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]);
    let end = usize::try_from(batch_length)
        .ok()
        .and_then(|length| length.checked_add(header::LOG_OVERHEAD))
        .map_or(fixed.len(), |end| end.min(fixed.len()));
    if end > header::CRC_COVERED_FROM {
        let crc = crc32c::crc32c(&fixed[header::CRC_COVERED_FROM..end]);
        fixed[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    let Ok(batch_header) = validate(&fixed, &limits(true)) else {
        return;
    };
    let batch = Bytes::from(fixed);
    read_stored_batch(&batch_header, &batch);
    for codec in 0..=4u8 {
        let settings = Recompression {
            compression_codec: Some(codec),
            compression_level: None,
            max_message_bytes: MAX_MESSAGE_BYTES,
        };
        if let Ok(recompressed) = to_topic_codec(batch.clone(), &batch_header, &settings) {
            if let Ok(header) = BatchHeader::parse(&recompressed) {
                read_stored_batch(&header, &recompressed);
            }
        }
    }
}

fn limits(compacted: bool) -> BatchLimits {
    BatchLimits {
        max_message_bytes: MAX_MESSAGE_BYTES,
        compacted,
        produce_version: 11,
        now_ms: NOW_MS,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
    }
}

/// What the log cleaner, ListOffsets and the transaction replay read from a stored batch.
fn read_stored_batch(batch_header: &BatchHeader, batch: &[u8]) {
    if let Ok(plain) = records::records_of(batch_header, batch) {
        let _ = records::for_each_record(batch_header, &plain, |record| {
            let _ = (record.offset, record.key, record.value);
        });
    }
    let _ = control::parse_marker(batch_header, batch);
    let _ = records::find_record(batch, |_, _| false);
}

/// A partition directory holding one segment at base offset 0. The input is a flags byte (bit
/// 0: clean shutdown; the other bits: the recovery point), the lengths of the `.index` and the
/// `.timeindex` as big-endian u16s, those two files, and the `.log` as the rest. The directory
/// is opened as start-up opens it. After an unclean shutdown everything it serves must be whole
/// batches with valid CRCs and increasing offsets (recovery keeps a valid prefix and nothing
/// else); after a clean one, reads must not fail. Then a batch is appended and read back.
pub fn segment_recovery(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (index, rest) = take_u16_prefixed(rest);
    let (time_index, log) = take_u16_prefixed(rest);
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let path = dir.path();
    let disk = Disk::real();
    for (suffix, bytes) in [(".log", log), (".index", index), (".timeindex", time_index)] {
        let file_path = path.join(format!("{:020}{suffix}", 0));
        let file = disk.create_file(&file_path).expect("create segment file");
        disk.write_all_at(&file, &file_path, bytes, 0)
            .expect("write segment file");
    }
    let clean_shutdown = flags & 1 == 1;
    let options = OpenOptions {
        recovery_point: i64::from(flags >> 1),
        log_start_offset: 0,
        clean_shutdown,
    };
    let config = LogConfig {
        segment_bytes: 1 << 20,
        segment_ms: i64::MAX,
        index_interval_bytes: 4096,
        max_index_size_bytes: 1 << 16,
        flush_interval_messages: u64::MAX,
        flush_interval_ms: i64::MAX,
    };
    let Ok(mut log) = PartitionLog::open(&disk, path, config, options, NOW_MS) else {
        return;
    };
    read_all(&log, !clean_shutdown);
    let batch = crate::record_batch::encode::batch(
        [crate::record_batch::encode::PlainRecord::new(
            None,
            Some(Bytes::from_static(b"after recovery")),
            NOW_MS,
        )],
        kafka_protocol::records::Compression::None,
    )
    .expect("encode a batch");
    let end_before = log.log_end_offset();
    if let Ok(info) = log.append(&batch, 0, NOW_MS, false) {
        assert_eq!(info.base_offset, end_before, "append after recovery");
        assert_eq!(log.log_end_offset(), end_before + 1);
        let read = log
            .read(info.base_offset, 1 << 20, true, i64::MAX)
            .expect("read the appended batch");
        assert!(!read.records.is_empty(), "the appended batch reads back");
    }
    let _ = log.close();
}

/// Reads every batch from the log start offset to the log end offset, as consumers fetch.
fn read_all(log: &PartitionLog, must_be_valid: bool) {
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = match log.read(offset, 1 << 20, true, i64::MAX) {
            Ok(read) => read,
            Err(error) => {
                assert!(!must_be_valid, "read after recovery failed: {error}");
                return;
            }
        };
        let mut next = offset;
        for item in BatchIter::new(&read.records) {
            let Ok((position, batch_header)) = item else {
                assert!(!must_be_valid, "recovery served bytes that are not a batch");
                return;
            };
            if must_be_valid {
                let end = position + batch_header.total_size();
                assert!(
                    header::crc_is_valid(&read.records[position..end]),
                    "recovery served a batch with a bad CRC at offset {}",
                    batch_header.base_offset
                );
                assert!(
                    batch_header.base_offset >= next || batch_header.last_offset() >= offset,
                    "offsets go backwards after recovery"
                );
            }
            next = next.max(batch_header.last_offset() + 1);
        }
        if next <= offset {
            return; // nothing whole was served from here (a gap or a torn tail)
        }
        offset = next;
    }
}

fn take_u16_prefixed(data: &[u8]) -> (&[u8], &[u8]) {
    if data.len() < 2 {
        return (&[], data);
    }
    let length = usize::from(u16::from_be_bytes([data[0], data[1]])).min(data.len() - 2);
    data[2..].split_at(length)
}

/// One record of a coordinator target's input.
struct InputRecord {
    kind: u8,
    key: Bytes,
    value: Option<Bytes>,
}

/// The records of a coordinator target's input, as described in the module docs.
fn records(mut data: &[u8]) -> Vec<InputRecord> {
    let mut out = Vec::new();
    while let Some((&kind, rest)) = data.split_first() {
        let Some((key, rest)) = take_i16_prefixed(rest) else {
            break;
        };
        let Some((value, rest)) = take_i16_prefixed(rest) else {
            break;
        };
        out.push(InputRecord {
            kind,
            key: Bytes::copy_from_slice(key.unwrap_or_default()),
            value: value.map(Bytes::copy_from_slice),
        });
        data = rest;
    }
    out
}

/// An i16 length and that many bytes (None for a negative length), and what follows.
#[allow(clippy::type_complexity)]
fn take_i16_prefixed(data: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    let length = i16::from_be_bytes([*data.first()?, *data.get(1)?]);
    let rest = &data[2..];
    let Ok(length) = usize::try_from(length) else {
        return Some((None, rest));
    };
    let length = length.min(rest.len());
    let (bytes, rest) = rest.split_at(length);
    Some((Some(bytes), rest))
}

struct FixedClock(AtomicI64);

impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// `__consumer_offsets` as the group coordinator's store sees it: the fuzzer's records to load,
/// and whatever the coordinator appends afterwards is accepted and dropped.
struct OffsetsInput(Mutex<Vec<StoredRecord>>);

impl OffsetStore for OffsetsInput {
    fn append(&self, _: &str, _: Vec<(Bytes, Option<Bytes>)>) -> Result<(), StoreError> {
        Ok(())
    }
    fn append_transactional(
        &self,
        _: &str,
        _: i64,
        _: i16,
        _: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), StoreError> {
        Ok(())
    }
    fn append_marker(
        &self,
        _: i32,
        _: i64,
        _: i16,
        _: bool,
        _: i32,
        _: i8,
    ) -> Result<(), StoreError> {
        Ok(())
    }
    fn partition_for(&self, group_id: &str) -> i32 {
        crate::storage::consumer_offsets::partition_for(group_id)
    }
    fn load(&self) -> Result<Vec<StoredRecord>, String> {
        Ok(std::mem::take(
            &mut *self.0.lock().unwrap_or_else(|p| p.into_inner()),
        ))
    }
}

/// Records of `__consumer_offsets` replayed as the group coordinator replays them at start-up.
/// A record's kind byte: bit 0 clear, a plain record; set with bit 1 clear, a record of a
/// transactional batch whose producer id is the kind's upper bits; set with bit 1 set, a
/// transaction marker of that producer (bit 2: commit) for the partition the key's first byte
/// names. A coordinator that loads then runs its timers now and a week later.
pub fn consumer_offsets(data: &[u8]) {
    let stored = records(data)
        .into_iter()
        .map(|record| match (record.kind & 1, record.kind & 2) {
            (0, _) => StoredRecord::Record {
                key: record.key,
                value: record.value,
                producer_id: None,
            },
            (_, 0) => StoredRecord::Record {
                key: record.key,
                value: record.value,
                producer_id: Some(i64::from(record.kind >> 3)),
            },
            _ => StoredRecord::Marker {
                partition: i32::from(record.key.first().copied().unwrap_or(0) % 50),
                producer_id: i64::from(record.kind >> 3),
                commit: record.kind & 4 != 0,
            },
        })
        .collect();
    let clock = Arc::new(FixedClock(AtomicI64::new(NOW_MS)));
    let store = Arc::new(OffsetsInput(Mutex::new(stored)));
    let config = GroupConfig::from_broker(&Config::default());
    let Ok(coordinator) = GroupCoordinator::new(config, clock.clone(), store) else {
        return;
    };
    coordinator.tick();
    clock.0.fetch_add(7 * 24 * 3_600_000, Ordering::SeqCst);
    coordinator.tick();
    coordinator.shutdown();
}

/// `__transaction_state` as the transaction coordinator's store sees it.
struct TxnInput(Mutex<Vec<(Bytes, Option<Bytes>)>>, AtomicI64);

impl TxnLogStore for TxnInput {
    fn partition_count(&self) -> i32 {
        50
    }
    fn append(&self, _: i32, _: Bytes, _: Option<Bytes>) -> Result<(), String> {
        Ok(())
    }
    fn load(&self) -> Result<Vec<(Bytes, Option<Bytes>)>, String> {
        Ok(std::mem::take(
            &mut *self.0.lock().unwrap_or_else(|p| p.into_inner()),
        ))
    }
    fn next_producer_id(&self) -> Result<i64, String> {
        Ok(self.1.fetch_add(1, Ordering::SeqCst))
    }
    fn coordinator_epoch(&self, _: i32) -> i32 {
        0
    }
}

impl MarkerSink for TxnInput {
    fn write_marker(
        &self,
        _: &str,
        _: i32,
        _: i64,
        _: i16,
        _: control::TxnMarker,
        _: i8,
    ) -> MarkerOutcome {
        MarkerOutcome::Written
    }
}

/// Records of `__transaction_state` (kind bytes are ignored) replayed as the transaction
/// coordinator replays them at start-up; one that loads then aborts timed-out transactions and
/// removes expired ids now and a month later.
pub fn transaction_state(data: &[u8]) {
    let loaded = records(data)
        .into_iter()
        .map(|record| (record.key, record.value))
        .collect();
    let clock = Arc::new(FixedClock(AtomicI64::new(NOW_MS)));
    let store = Arc::new(TxnInput(Mutex::new(loaded), AtomicI64::new(1000)));
    let config = TxnConfig::from_broker(&Config::default());
    let Ok(coordinator) = TransactionCoordinator::new(config, clock.clone(), store.clone(), store)
    else {
        return;
    };
    coordinator.abort_timed_out_transactions();
    coordinator.remove_expired_ids();
    clock.0.fetch_add(30 * 24 * 3_600_000, Ordering::SeqCst);
    coordinator.abort_timed_out_transactions();
    coordinator.remove_expired_ids();
    coordinator.shutdown();
}
