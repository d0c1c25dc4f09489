//! The coordinator's state machine against an in-memory log and marker sink: InitProducerId's
//! epochs, fencing and recovery, TV1 and TV2 ends and their retries, the pending-transition rule,
//! timeouts, expiry, reloading, and the record formats against bytes built from Kafka's schema.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;

use super::log_record::{decode_key, decode_value, encode_key, encode_value};
use super::state::{TxnRecord, TxnState, TV_0, TV_2};
use super::*;

struct Clock(AtomicI64);

impl crate::time::Clock for Clock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// (topic, partition, producer id, epoch, commit) of a marker written.
type Marker = (String, i32, i64, i16, bool);

#[derive(Default)]
struct Memory {
    records: Mutex<Vec<(i32, Bytes, Option<Bytes>)>>,
    next_id: AtomicI64,
    markers: Mutex<Vec<Marker>>,
    /// Markers to this topic cannot be written now.
    failing_topic: Mutex<Option<String>>,
}

impl TxnLogStore for Memory {
    fn partition_count(&self) -> i32 {
        50
    }
    fn append(&self, partition: i32, key: Bytes, value: Option<Bytes>) -> Result<(), String> {
        self.records.lock().unwrap().push((partition, key, value));
        Ok(())
    }
    fn load(&self) -> Result<Vec<(Bytes, Option<Bytes>)>, String> {
        let records = self.records.lock().unwrap();
        Ok(records
            .iter()
            .map(|(_, k, v)| (k.clone(), v.clone()))
            .collect())
    }
    fn next_producer_id(&self) -> Result<i64, String> {
        Ok(self.next_id.fetch_add(1, Ordering::SeqCst) + 1000)
    }
    fn coordinator_epoch(&self, _partition: i32) -> i32 {
        0
    }
}

impl MarkerSink for Memory {
    fn write_marker(
        &self,
        topic: &str,
        p: i32,
        pid: i64,
        epoch: i16,
        marker: TxnMarker,
        _tv: i8,
    ) -> MarkerOutcome {
        let commit = marker.commit;
        if self.failing_topic.lock().unwrap().as_deref() == Some(topic) {
            return MarkerOutcome::Retry;
        }
        self.markers
            .lock()
            .unwrap()
            .push((topic.to_string(), p, pid, epoch, commit));
        MarkerOutcome::Written
    }
}

struct Harness {
    clock: Arc<Clock>,
    memory: Arc<Memory>,
    coordinator: Arc<TransactionCoordinator>,
}

impl Harness {
    fn new() -> Harness {
        Harness::with(Arc::new(Memory::default()))
    }

    fn with(memory: Arc<Memory>) -> Harness {
        let clock = Arc::new(Clock(AtomicI64::new(1_000_000)));
        let config = TxnConfig {
            max_timeout_ms: 900_000,
            id_expiration_ms: 604_800_000,
            abort_interval_ms: 10_000,
            remove_expired_interval_ms: 3_600_000,
        };
        let coordinator =
            TransactionCoordinator::new(config, clock.clone(), memory.clone(), memory.clone())
                .unwrap();
        Harness {
            clock,
            memory,
            coordinator,
        }
    }

    fn state(&self, id: &str) -> TxnState {
        self.coordinator.describe_transaction(id).unwrap().state
    }

    fn markers(&self) -> Vec<Marker> {
        std::mem::take(&mut *self.memory.markers.lock().unwrap())
    }
}

fn tp(topic: &str, partition: i32) -> (String, i32) {
    (topic.to_string(), partition)
}

#[test]
fn init_bumps_the_epoch_and_fences_older_producers() {
    let h = Harness::new();
    let c = &h.coordinator;
    assert_eq!(
        c.init_producer_id("t", 0, None),
        Err(ResponseError::InvalidTransactionTimeout)
    );
    assert_eq!(
        c.init_producer_id("t", 900_001, None),
        Err(ResponseError::InvalidTransactionTimeout)
    );
    assert_eq!(
        c.init_producer_id("", 1000, None),
        Err(ResponseError::InvalidRequest)
    );
    let (pid, epoch) = c.init_producer_id("t", 60_000, None).unwrap();
    assert_eq!(epoch, 0);
    assert_eq!(
        c.init_producer_id("t", 60_000, None),
        Ok((pid, 1)),
        "a new instance fences"
    );
    // The old instance is fenced everywhere.
    assert_eq!(
        c.add_partitions("t", pid, 0, &[tp("a", 0)], TV_0),
        Err(ResponseError::ProducerFenced)
    );
    assert_eq!(
        c.end_txn("t", pid, 0, true, TV_0),
        Err(ResponseError::ProducerFenced)
    );
    // KIP-360: recovering with the current epoch bumps; a retry of that call does not.
    assert_eq!(
        c.init_producer_id("t", 60_000, Some((pid, 1))),
        Ok((pid, 2))
    );
    assert_eq!(
        c.init_producer_id("t", 60_000, Some((pid, 1))),
        Ok((pid, 2))
    );
    assert_eq!(
        c.init_producer_id("t", 60_000, Some((pid, 0))),
        Err(ResponseError::ProducerFenced)
    );
    assert_eq!(
        c.init_producer_id("t", 60_000, Some((pid + 77, 2))),
        Err(ResponseError::ProducerFenced)
    );
    assert_eq!(
        c.add_partitions("nope", pid, 2, &[tp("a", 0)], TV_0),
        Err(ResponseError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.add_partitions("t", pid + 1, 2, &[tp("a", 0)], TV_0),
        Err(ResponseError::InvalidProducerIdMapping)
    );
}

#[test]
fn tv1_commit_and_abort_write_markers_and_retries_succeed() {
    let h = Harness::new();
    let c = &h.coordinator;
    let (pid, epoch) = c.init_producer_id("t", 60_000, None).unwrap();
    assert_eq!(
        c.end_txn("t", pid, epoch, true, TV_0),
        Err(ResponseError::InvalidTxnState)
    );
    c.add_partitions("t", pid, epoch, &[tp("a", 0), tp("a", 1)], TV_0)
        .unwrap();
    c.add_partitions("t", pid, epoch, &[tp("a", 1)], TV_0)
        .unwrap();
    assert_eq!(h.state("t"), TxnState::Ongoing);
    assert_eq!(c.end_txn("t", pid, epoch, true, TV_0), Ok((-1, -1)));
    assert_eq!(
        h.markers(),
        vec![
            ("a".to_string(), 0, pid, epoch, true),
            ("a".to_string(), 1, pid, epoch, true)
        ]
    );
    assert_eq!(h.state("t"), TxnState::CompleteCommit);
    assert_eq!(
        c.end_txn("t", pid, epoch, true, TV_0),
        Ok((-1, -1)),
        "a retry"
    );
    assert_eq!(
        c.end_txn("t", pid, epoch, false, TV_0),
        Err(ResponseError::InvalidTxnState)
    );
    c.add_partitions("t", pid, epoch, &[tp("b", 0)], TV_0)
        .unwrap();
    c.end_txn("t", pid, epoch, false, TV_0).unwrap();
    assert_eq!(h.markers(), vec![("b".to_string(), 0, pid, epoch, false)]);
    assert_eq!(h.state("t"), TxnState::CompleteAbort);
}

#[test]
fn tv2_bumps_the_epoch_at_every_end_and_accepts_empty_aborts() {
    let h = Harness::new();
    let c = &h.coordinator;
    let (pid, e0) = c.init_producer_id("t", 60_000, None).unwrap();
    c.add_partitions("t", pid, e0, &[tp("a", 0)], TV_2).unwrap();
    let (pid1, e1) = c.end_txn("t", pid, e0, true, TV_2).unwrap();
    assert_eq!((pid1, e1), (pid, e0 + 1));
    assert_eq!(
        h.markers(),
        vec![("a".to_string(), 0, pid, e1, true)],
        "markers carry the bumped epoch"
    );
    // A retry carries the epoch before the bump and gets the same answer.
    assert_eq!(c.end_txn("t", pid, e0, true, TV_2), Ok((pid, e1)));
    assert_eq!(
        c.end_txn("t", pid, e0, false, TV_2),
        Err(ResponseError::InvalidTxnState)
    );
    // An abort with nothing open is accepted, and bumps.
    assert_eq!(c.end_txn("t", pid, e1, false, TV_2), Ok((pid, e1 + 1)));
    assert!(h.markers().is_empty());
    assert_eq!(
        c.end_txn("t", pid, e1, false, TV_2),
        Ok((pid, e1 + 1)),
        "a retry"
    );
    assert_eq!(
        c.end_txn("t", pid, e1 + 1, true, TV_2),
        Err(ResponseError::InvalidTxnState)
    );
    assert_eq!(
        c.end_txn("t", pid, e1 - 1, false, TV_2),
        Err(ResponseError::ProducerFenced)
    );
}

#[test]
fn init_during_a_transaction_aborts_it_first() {
    let h = Harness::new();
    let c = &h.coordinator;
    let (pid, epoch) = c.init_producer_id("t", 60_000, None).unwrap();
    c.add_partitions("t", pid, epoch, &[tp("a", 0)], TV_0)
        .unwrap();
    assert_eq!(
        c.init_producer_id("t", 60_000, None),
        Err(ResponseError::ConcurrentTransactions)
    );
    // Aborted once, at the fenced epoch; the retry bumps once more.
    assert_eq!(
        h.markers(),
        vec![("a".to_string(), 0, pid, epoch + 1, false)]
    );
    assert_eq!(h.state("t"), TxnState::CompleteAbort);
    assert_eq!(c.init_producer_id("t", 60_000, None), Ok((pid, epoch + 2)));
    assert_eq!(
        c.end_txn("t", pid, epoch, false, TV_0),
        Err(ResponseError::ProducerFenced)
    );
}

#[test]
fn exhausted_epochs_move_to_a_new_producer_id() {
    let h = Harness::new();
    let c = &h.coordinator;
    let (pid, _) = c.init_producer_id("t", 60_000, None).unwrap();
    {
        let entry = c.get("t").unwrap();
        lock(&entry).record.producer_epoch = i16::MAX - 1;
    }
    let (new_pid, epoch) = c
        .init_producer_id("t", 60_000, Some((pid, i16::MAX - 1)))
        .unwrap();
    assert_ne!(new_pid, pid);
    assert_eq!(epoch, 0);
    // TV2: the end that exhausts the epoch hands out the next producer id.
    {
        let entry = c.get("t").unwrap();
        lock(&entry).record.producer_epoch = i16::MAX - 2;
    }
    c.add_partitions("t", new_pid, i16::MAX - 2, &[tp("a", 0)], TV_2)
        .unwrap();
    let (next_pid, next_epoch) = c.end_txn("t", new_pid, i16::MAX - 2, true, TV_2).unwrap();
    assert_eq!(next_epoch, i16::MAX - 1);
    assert_eq!(next_pid, new_pid);
    c.add_partitions("t", new_pid, i16::MAX - 1, &[tp("a", 0)], TV_2)
        .unwrap();
    let (rotated, epoch) = c.end_txn("t", new_pid, i16::MAX - 1, true, TV_2).unwrap();
    assert_eq!(epoch, 0);
    assert_ne!(rotated, new_pid);
    assert_eq!(
        h.markers().last().unwrap().3,
        i16::MAX,
        "markers at the last epoch"
    );
    // A retry across the rotation is recognised.
    assert_eq!(
        c.end_txn("t", new_pid, i16::MAX - 1, true, TV_2),
        Ok((rotated, 0))
    );
}

#[test]
fn pending_transitions_answer_concurrent_transactions() {
    let h = Harness::new();
    let c = &h.coordinator;
    let (pid, epoch) = c.init_producer_id("t", 60_000, None).unwrap();
    c.add_partitions("t", pid, epoch, &[tp("a", 0)], TV_0)
        .unwrap();
    *h.memory.failing_topic.lock().unwrap() = Some("a".to_string());
    // The prepare is written and answered; the marker waits.
    assert_eq!(c.end_txn("t", pid, epoch, true, TV_0), Ok((-1, -1)));
    assert_eq!(h.state("t"), TxnState::PrepareCommit);
    assert_eq!(
        c.add_partitions("t", pid, epoch, &[tp("b", 0)], TV_0),
        Err(ResponseError::ConcurrentTransactions)
    );
    assert_eq!(
        c.end_txn("t", pid, epoch, true, TV_0),
        Err(ResponseError::ConcurrentTransactions)
    );
    assert_eq!(
        c.end_txn("t", pid, epoch, false, TV_0),
        Err(ResponseError::InvalidTxnState)
    );
    assert_eq!(
        c.init_producer_id("t", 60_000, None),
        Err(ResponseError::ConcurrentTransactions)
    );
    *h.memory.failing_topic.lock().unwrap() = None;
    c.complete_unfinished();
    assert_eq!(h.state("t"), TxnState::CompleteCommit);
    assert_eq!(h.markers().len(), 1);
}

#[test]
fn timed_out_transactions_are_aborted_and_the_producer_fenced() {
    let h = Harness::new();
    let c = &h.coordinator;
    let (pid, epoch) = c.init_producer_id("t", 1000, None).unwrap();
    c.add_partitions("t", pid, epoch, &[tp("a", 0)], TV_0)
        .unwrap();
    c.abort_timed_out_transactions();
    assert_eq!(h.state("t"), TxnState::Ongoing);
    h.clock.0.fetch_add(1001, Ordering::SeqCst);
    c.abort_timed_out_transactions();
    assert_eq!(h.state("t"), TxnState::CompleteAbort);
    assert_eq!(
        h.markers(),
        vec![("a".to_string(), 0, pid, epoch + 1, false)]
    );
    assert_eq!(
        c.end_txn("t", pid, epoch, true, TV_0),
        Err(ResponseError::ProducerFenced)
    );
    assert_eq!(
        c.add_partitions("t", pid, epoch, &[tp("a", 0)], TV_0),
        Err(ResponseError::ProducerFenced)
    );
}

#[test]
fn idle_ids_expire_with_a_tombstone() {
    let h = Harness::new();
    let c = &h.coordinator;
    c.init_producer_id("t", 1000, None).unwrap();
    h.clock.0.fetch_add(604_800_000, Ordering::SeqCst);
    c.remove_expired_ids();
    assert_eq!(
        c.describe_transaction("t"),
        Err(ResponseError::TransactionalIdNotFound)
    );
    let records = h.memory.records.lock().unwrap();
    assert_eq!(records.last().unwrap().2, None, "a tombstone");
}

#[test]
fn state_is_reloaded_and_prepared_transactions_are_completed() {
    let memory = Arc::new(Memory::default());
    let h = Harness::with(memory.clone());
    let (pid, epoch) = h.coordinator.init_producer_id("t", 60_000, None).unwrap();
    h.coordinator
        .add_partitions("t", pid, epoch, &[tp("a", 0)], TV_0)
        .unwrap();
    h.coordinator.init_producer_id("u", 60_000, None).unwrap();
    *memory.failing_topic.lock().unwrap() = Some("a".to_string());
    h.coordinator.end_txn("t", pid, epoch, false, TV_0).unwrap();
    // A restart: the prepared abort is found and completed.
    *memory.failing_topic.lock().unwrap() = None;
    let again = Harness::with(memory.clone());
    assert_eq!(again.state("t"), TxnState::PrepareAbort);
    assert_eq!(again.state("u"), TxnState::Empty);
    again.coordinator.complete_unfinished();
    assert_eq!(again.state("t"), TxnState::CompleteAbort);
    assert_eq!(
        again.markers(),
        vec![("a".to_string(), 0, pid, epoch, false)]
    );
    let listed = again
        .coordinator
        .list_transactions(&[TxnState::Empty], &[], -1, None)
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].transactional_id, "u");
}

fn record(state: TxnState, partitions: &[(&str, i32)]) -> TxnRecord {
    TxnRecord {
        producer_id: 42,
        prev_producer_id: 41,
        next_producer_id: -1,
        producer_epoch: 3,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state,
        partitions: partitions
            .iter()
            .map(|(t, p)| (t.to_string(), *p))
            .collect(),
        start_ms: 100,
        last_update_ms: 200,
        client_tv: TV_2,
    }
}

#[test]
fn log_records_have_kafkas_bytes() {
    assert_eq!(
        encode_key("tx").unwrap().to_vec(),
        vec![0, 0, 0, 2, b't', b'x']
    );
    assert_eq!(decode_key(&[0, 0, 0, 2, b't', b'x']).unwrap(), "tx");
    assert!(decode_key(&[0, 1, 0, 2, b't', b'x']).is_err());
    let ongoing = record(TxnState::Ongoing, &[("a", 1), ("a", 0), ("bb", 7)]);
    // Version 1, built field by field from TransactionLogValue.json.
    let mut expected = BytesMut::new();
    expected.put_i16(1);
    expected.put_i64(42);
    expected.put_i16(3);
    expected.put_i32(60_000);
    expected.put_i8(1);
    expected.put_u8(3); // two topics, compact
    expected.put_slice(&[2, b'a', 3]);
    expected.put_i32(0);
    expected.put_i32(1);
    expected.put_u8(0); // the topic's tagged fields
    expected.put_slice(&[3, b'b', b'b', 2]);
    expected.put_i32(7);
    expected.put_u8(0);
    expected.put_i64(200);
    expected.put_i64(100);
    expected.put_u8(2); // tagged fields: previous producer id, client transaction version
    expected.put_slice(&[0, 8]);
    expected.put_i64(41);
    expected.put_slice(&[2, 2]);
    expected.put_i16(2);
    assert_eq!(encode_value(&ongoing).to_vec(), expected.to_vec());
    assert_eq!(decode_value(&expected).unwrap(), ongoing);
    // Empty: null partitions.
    let empty = encode_value(&record(TxnState::Empty, &[]));
    assert_eq!(empty[17], 0, "a null compact array");
    // Version 0, as older brokers wrote it.
    let mut v0 = BytesMut::new();
    v0.put_i16(0);
    v0.put_i64(9);
    v0.put_i16(1);
    v0.put_i32(1000);
    v0.put_i8(2);
    v0.put_i32(1);
    v0.put_i16(1);
    v0.put_slice(b"t");
    v0.put_i32(1);
    v0.put_i32(5);
    v0.put_i64(7);
    v0.put_i64(6);
    let decoded = decode_value(&v0).unwrap();
    assert_eq!(decoded.state, TxnState::PrepareCommit);
    assert_eq!(decoded.partitions, BTreeSet::from([("t".to_string(), 5)]));
    assert_eq!((decoded.last_update_ms, decoded.start_ms), (7, 6));
    assert_eq!(decoded.client_tv, TV_0);
    // Truncated or hostile lengths are refused, never allocated.
    assert!(decode_value(&expected[..20]).is_err());
    let mut hostile = v0.clone();
    hostile[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(decode_value(&hostile).is_err());
}
