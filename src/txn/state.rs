//! One transactional id's state, as Kafka's `TransactionMetadata` keeps it, and the transitions
//! between states. A transition is prepared (`prepare_*`, which marks it pending and returns the
//! record to persist), written to `__transaction_state`, and only then completed (`complete`):
//! while one is pending, every request for the id is answered CONCURRENT_TRANSACTIONS.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

/// Kafka's `RecordBatch.NO_PRODUCER_ID` and `NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Transaction versions (the `transaction.version` feature): 0 the classic protocol; 2 KIP-890
/// part 2, where every EndTxn bumps the epoch and Produce and TxnOffsetCommit add partitions.
pub const TV_0: i16 = 0;
pub const TV_2: i16 = 2;

/// The states of a transaction, with the ids `__transaction_state` stores and the names
/// ListTransactions and DescribeTransactions report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

use TxnState::*;

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        Empty,
        Ongoing,
        PrepareCommit,
        PrepareAbort,
        CompleteCommit,
        CompleteAbort,
        Dead,
        PrepareEpochFence,
    ];

    pub fn id(self) -> i8 {
        match self {
            Empty => 0,
            Ongoing => 1,
            PrepareCommit => 2,
            PrepareAbort => 3,
            CompleteCommit => 4,
            CompleteAbort => 5,
            Dead => 6,
            PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Empty => "Empty",
            Ongoing => "Ongoing",
            PrepareCommit => "PrepareCommit",
            PrepareAbort => "PrepareAbort",
            CompleteCommit => "CompleteCommit",
            CompleteAbort => "CompleteAbort",
            Dead => "Dead",
            PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The states a transition into this one may start from.
    fn valid_previous(self) -> &'static [TxnState] {
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// A transaction is open (or being ended): the producer id may not change.
    pub fn is_pending_transaction(self) -> bool {
        matches!(self, Ongoing | PrepareAbort | PrepareCommit)
    }
}

/// Kafka's `isEpochExhausted`: an epoch this high cannot be bumped once more and still leave
/// room to fence, so the next bump takes a new producer id.
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// What `__transaction_state` stores of a transactional id (one `TransactionLogValue`), and the
/// in-memory state a transition produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub producer_id: i64,
    /// The producer id before the transition that wrote this record.
    pub prev_producer_id: i64,
    /// A producer id allocated for after the transaction (TV2, epoch exhausted), else -1.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// Not stored; -1 after loading, as in Kafka.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    /// When the transaction began (its first partition), -1 when none is open.
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The transaction version the client spoke when the state last changed (0 or 2).
    pub client_tv: i16,
}

/// One transactional id: its persisted state, the transition being written, and bookkeeping.
#[derive(Clone, Debug)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub record: TxnRecord,
    /// The state a prepared transition is moving to, until it is written and completed.
    pub pending: Option<TxnState>,
    /// An epoch fence whose write failed: the next fence does not bump the epoch again.
    pub failed_epoch_fence: bool,
}

impl TxnMetadata {
    /// A transactional id seen for the first time: a fresh producer id, no epoch yet.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMetadata::loaded(
            transactional_id,
            TxnRecord {
                producer_id,
                prev_producer_id: NO_PRODUCER_ID,
                next_producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                last_producer_epoch: NO_PRODUCER_EPOCH,
                timeout_ms,
                state: Empty,
                partitions: BTreeSet::new(),
                start_ms: -1,
                last_update_ms: now_ms,
                client_tv: TV_0,
            },
        )
    }

    pub fn loaded(transactional_id: &str, record: TxnRecord) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            record,
            pending: None,
            failed_epoch_fence: false,
        }
    }

    pub fn state(&self) -> TxnState {
        self.record.state
    }

    /// Marks the transition to `next` pending and returns it; a state it may not come from is
    /// a coordinator bug, answered UNKNOWN_SERVER_ERROR.
    fn prepare(&mut self, next: TxnRecord) -> Result<TxnRecord, ResponseError> {
        if self.pending.is_some() || !next.state.valid_previous().contains(&self.record.state) {
            tracing::error!(transactional_id = %self.transactional_id, from = ?self.record.state, to = ?next.state, pending = ?self.pending, "invalid transaction state transition");
            return Err(ResponseError::UnknownServerError);
        }
        self.pending = Some(next.state);
        Ok(TxnRecord {
            prev_producer_id: self.record.producer_id,
            ..next
        })
    }

    /// Applies a prepared transition once its record is written.
    pub fn complete(&mut self, record: TxnRecord) {
        self.pending = None;
        self.record = record;
    }

    /// Drops a prepared transition whose record could not be written.
    pub fn abandon(&mut self) {
        self.pending = None;
    }

    /// Kafka's `prepareFenceProducerEpoch`: the epoch goes up by one (not again after a fence
    /// whose write failed, never past i16::MAX); the state is PrepareEpochFence, never written.
    pub fn prepare_fence_producer_epoch(&mut self) -> Result<TxnRecord, ResponseError> {
        let epoch = self.record.producer_epoch;
        let bumped = if self.failed_epoch_fence || epoch == i16::MAX {
            epoch
        } else {
            epoch + 1
        };
        let next = TxnRecord {
            producer_epoch: bumped,
            state: PrepareEpochFence,
            ..self.record.clone()
        };
        self.prepare(next)
    }

    /// Kafka's `prepareIncrementProducerEpoch` (InitProducerId on an id with no transaction
    /// open): a new producer instance (no expected epoch) bumps the epoch and forgets the last
    /// one; the current instance recovering (expected = current) bumps and remembers it; a retry
    /// of a call that succeeded (expected = last) keeps the epoch; anything else is fenced.
    pub fn prepare_increment_producer_epoch(
        &mut self,
        timeout_ms: i32,
        expected_epoch: Option<i16>,
        now_ms: i64,
    ) -> Result<TxnRecord, ResponseError> {
        let current = self.record.producer_epoch;
        let (producer_epoch, last_producer_epoch) = match expected_epoch {
            None => (current + 1, NO_PRODUCER_EPOCH),
            Some(expected) if current == NO_PRODUCER_EPOCH || expected == current => {
                (current + 1, current)
            }
            Some(expected) if expected == self.record.last_producer_epoch => {
                (current, self.record.last_producer_epoch)
            }
            Some(_) => return Err(ResponseError::ProducerFenced),
        };
        let next = TxnRecord {
            producer_epoch,
            last_producer_epoch,
            timeout_ms,
            state: Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            ..self.record.clone()
        };
        self.prepare(next)
    }

    /// Kafka's `prepareProducerIdRotation`: the epoch is exhausted, so a new producer id at
    /// epoch 0.
    pub fn prepare_producer_id_rotation(
        &mut self,
        new_producer_id: i64,
        timeout_ms: i32,
        now_ms: i64,
        record_last_epoch: bool,
    ) -> Result<TxnRecord, ResponseError> {
        let next = TxnRecord {
            producer_id: new_producer_id,
            producer_epoch: 0,
            last_producer_epoch: if record_last_epoch {
                self.record.producer_epoch
            } else {
                NO_PRODUCER_EPOCH
            },
            timeout_ms,
            state: Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            ..self.record.clone()
        };
        self.prepare(next)
    }

    /// Kafka's `prepareAddPartitions`: Ongoing with the partitions added; a transaction that
    /// was not open starts now.
    pub fn prepare_add_partitions(
        &mut self,
        added: &[(String, i32)],
        now_ms: i64,
        client_tv: i16,
    ) -> Result<TxnRecord, ResponseError> {
        let start_ms = match self.record.state {
            Empty | CompleteAbort | CompleteCommit => now_ms,
            _ => self.record.start_ms,
        };
        let mut partitions = self.record.partitions.clone();
        partitions.extend(added.iter().cloned());
        let next = TxnRecord {
            state: Ongoing,
            partitions,
            start_ms,
            last_update_ms: now_ms,
            client_tv,
            ..self.record.clone()
        };
        self.prepare(next)
    }

    /// Kafka's `prepareAbortOrCommit`: PrepareCommit or PrepareAbort. With TV2 the epoch goes up
    /// by one (an abort at i16::MAX stays, to let a broken state recover) unless `bump` is off
    /// (an epoch fence already bumped it), and `next_producer_id` is the id to switch to after
    /// an exhausted epoch. An abort with no partition added (TV2) starts now.
    pub fn prepare_abort_or_commit(
        &mut self,
        state: TxnState,
        client_tv: i16,
        next_producer_id: i64,
        now_ms: i64,
        no_partition_added: bool,
        bump: bool,
    ) -> Result<TxnRecord, ResponseError> {
        let epoch = self.record.producer_epoch;
        let (producer_epoch, last_producer_epoch) = if client_tv >= TV_2 && bump {
            let bumped = if epoch == i16::MAX && state == PrepareAbort {
                tracing::error!(transactional_id = %self.transactional_id, "aborting with the producer epoch at its maximum");
                epoch
            } else {
                epoch + 1
            };
            (bumped, epoch)
        } else {
            (epoch, self.record.last_producer_epoch)
        };
        let next = TxnRecord {
            producer_epoch,
            last_producer_epoch,
            state,
            start_ms: if no_partition_added {
                now_ms
            } else {
                self.record.start_ms
            },
            next_producer_id,
            last_update_ms: now_ms,
            client_tv,
            ..self.record.clone()
        };
        self.prepare(next)
    }

    /// Kafka's `prepareComplete`: CompleteCommit or CompleteAbort once every marker is written,
    /// with no partitions; after an exhausted epoch (TV2) the next producer id at epoch 0.
    pub fn prepare_complete(&mut self, now_ms: i64) -> Result<TxnRecord, ResponseError> {
        self.failed_epoch_fence = false;
        let state = if self.record.state == PrepareCommit {
            CompleteCommit
        } else {
            CompleteAbort
        };
        let rotate =
            self.record.client_tv >= TV_2 && self.record.next_producer_id != NO_PRODUCER_ID;
        let next = TxnRecord {
            producer_id: if rotate {
                self.record.next_producer_id
            } else {
                self.record.producer_id
            },
            producer_epoch: if rotate {
                0
            } else {
                self.record.producer_epoch
            },
            next_producer_id: NO_PRODUCER_ID,
            state,
            partitions: BTreeSet::new(),
            last_update_ms: now_ms,
            ..self.record.clone()
        };
        self.prepare(next)
    }

    /// Kafka's `prepareDead`: the id expired; its record becomes a tombstone.
    pub fn prepare_dead(&mut self) -> Result<TxnRecord, ResponseError> {
        let next = TxnRecord {
            state: Dead,
            partitions: BTreeSet::new(),
            ..self.record.clone()
        };
        self.prepare(next)
    }
}
